"""Solo profiles stored with a job's image and command (issue 4), and their reads.

Write: ``solo_profile_record`` turns the node agent's samples (``scheduler.agent.profiling.Sample``
objects, or their dicts as the agent publishes them) into a ``SoloProfile`` row keyed by (image
reference, sha256 of the command line, GPU model). A second recording of the same key is merged
with the stored one, weighted by steady-state sample counts::

    gpu_util, mem_util, solo_throughput = (n_old * old + n_new * new) / (n_old + n_new)
    gpu_memory_mib = max(old, new)          (a peak: the larger one is the safe one to pack with)
    samples = n_old + n_new                 measured_at = the latest recording

A utilisation the sampler did not measure (NaN in its samples: the simulated backend's ground truth
has none) is stored empty (None), never as 0 %; in a merge the side that measured it is kept, and it
stays empty while no recording measured it. (The weights are the sample counts of whole recordings,
so one that measured no utilisation still counts in ``n_old``; a key is recorded by one kind of
sampler, as a GPU model is either simulated or real.)

Reads (selectors; kept beside the service because both are about one model): ``solo_profile_for_job``
and the batched ``solo_profiles_for_jobs`` return ``JobRequest.profile`` dicts (keys of
``scheduler.interference.features.PROFILE_KEYS``, built by ``profiling.SoloProfile.as_job_profile``,
so the scheduler sees the same dict whether the agent's JSON-lines store or the database served
it; a utilisation not measured is left out of the dict, the form in which the interference model's
features read it as missing, as for Gavel's rows); ``fill_running_task_profiles`` fills ``ClusterSnapshot.task_profiles`` for running tasks.
When a configuration was profiled on several GPU models, the most recent recording wins.
"""

from __future__ import annotations

import functools
import hashlib
import math
import shlex
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from jobs.models import Job, SoloProfile
from scheduler.agent import profiling
from scheduler.model import ClusterSnapshot

ProfileDict = dict[str, float | str]


def command_line(command: str | Sequence[str], args: Sequence[str] = ()) -> str:
    """The command as one shell-quoted line: a job's ``command + args`` or the agent's string."""
    if isinstance(command, str):
        return " ".join([command, *map(shlex.quote, args)]) if args else command
    return shlex.join([*map(str, command), *map(str, args)])


def command_hash(command: str) -> str:
    return hashlib.sha256(command.encode()).hexdigest()


def _util(value: Any) -> float:
    """A sample's utilisation; None (not measured) becomes NaN, the summary's unknown."""
    return math.nan if value is None else float(value)


def _measured(value: float) -> float | None:
    return None if math.isnan(value) else value


def _as_sample(raw: profiling.Sample | Mapping[str, Any]) -> profiling.Sample:
    if isinstance(raw, profiling.Sample):
        return raw
    tput = raw.get("throughput")
    return profiling.Sample(
        t=float(raw["t"]),
        gpu_util=_util(raw.get("gpu_util")),
        mem_util=_util(raw.get("mem_util")),
        memory_mib=float(raw["memory_mib"]),
        throughput=float(tput) if tput is not None else None,
    )


def _weighted(old: float | None, n_old: int, new: float | None, n_new: int) -> float | None:
    if old is None:
        return new
    if new is None:
        return old
    return (n_old * old + n_new * new) / (n_old + n_new)


@transaction.atomic
def solo_profile_record(
    *,
    image: str,
    command: str | Sequence[str],
    gpu_model: str,
    samples: Iterable[profiling.Sample | Mapping[str, Any]],
    warmup_s: float = 10.0,
    batch_size: float | None = None,
    amp: bool | None = None,
    model_family: str = "",
    measured_at: datetime | None = None,
) -> SoloProfile:
    """Aggregate one solo run's samples into the stored profile of (image, command, GPU model).

    Samples before ``warmup_s`` are dropped (``profiling.summarize``); ValueError when none is left.
    A utilisation that is NaN (or None in a sample dict) in the samples is not measured and stored
    empty. Merging with an earlier recording follows the module docstring. The stored row is locked while
    merging, so concurrent recordings of a known profile are not lost; two *first* recordings at once
    meet the unique constraint (IntegrityError) and the later one must be retried.
    """
    line = command_line(command)
    summary = profiling.summarize([_as_sample(s) for s in samples], image, line, gpu_model, warmup_s)
    key = {"image": image, "command_hash": command_hash(line), "gpu_model": gpu_model}
    when = measured_at or timezone.now()
    row = SoloProfile.objects.select_for_update().filter(**key).first()
    if row is None:
        row = SoloProfile(**key, command=line, samples=0, gpu_util=None, mem_util=None, gpu_memory_mib=0.0)
        n_old = 0
    else:
        n_old = row.samples
    n_new = summary.samples
    # fmean of a run's NaN utilisations is NaN: that run measured none, so it leaves the stored value.
    row.gpu_util = _weighted(row.gpu_util, n_old, _measured(summary.gpu_util), n_new)
    row.mem_util = _weighted(row.mem_util, n_old, _measured(summary.mem_util), n_new)
    row.gpu_memory_mib = max(row.gpu_memory_mib if n_old else 0.0, summary.gpu_memory_mib)
    row.solo_throughput = _weighted(row.solo_throughput, n_old, summary.solo_throughput, n_new)
    row.samples = n_old + n_new
    row.measured_at = when
    if batch_size is not None:
        row.batch_size = float(batch_size)
    if amp is not None:
        row.amp = amp
    if model_family:
        row.model_family = model_family
    row.save()
    return row


def as_job_profile(row: SoloProfile) -> ProfileDict:
    """``JobRequest.profile`` for a stored row (the agent's ``SoloProfile.as_job_profile`` keys), without
    the utilisations the row does not have (not measured: missing, never 0)."""
    extra: dict[str, float | str] = {}
    if row.batch_size is not None:
        extra["batch_size"] = row.batch_size
    if row.amp is not None:
        extra["amp"] = 1.0 if row.amp else 0.0
    if row.model_family:
        extra["model_family"] = row.model_family
    profile = profiling.SoloProfile(
        image=row.image,
        command=row.command,
        gpu_model=row.gpu_model,
        gpu_util=math.nan if row.gpu_util is None else row.gpu_util,
        mem_util=math.nan if row.mem_util is None else row.mem_util,
        gpu_memory_mib=row.gpu_memory_mib,
        solo_throughput=row.solo_throughput,
        samples=row.samples,
        duration_s=0.0,
        extra=extra,
    ).as_job_profile()
    return {k: v for k, v in profile.items() if not (isinstance(v, float) and math.isnan(v))}


def job_configuration(job: Job) -> tuple[str, str]:
    """(image reference, command hash): the key a job shares with its solo profile and measurements."""
    command, args = job.command or [], job.args or []
    if isinstance(command, list) and isinstance(args, list):
        # The cycle asks this of every waiting and running job: the hash is memoised per command.
        return job.image.reference, _list_command_hash(tuple(map(str, command)), tuple(map(str, args)))
    return job.image.reference, command_hash(command_line(command, args))


@functools.lru_cache(maxsize=4096)
def _list_command_hash(command: tuple[str, ...], args: tuple[str, ...]) -> str:
    return command_hash(command_line(command, args))


def solo_profiles_for_jobs(jobs: Sequence[Job]) -> dict[int, ProfileDict]:
    """Job id -> profile for the jobs whose image and command were profiled (one query)."""
    keys = {job.pk: job_configuration(job) for job in jobs}
    if not keys:
        return {}
    rows = SoloProfile.objects.filter(
        image__in={k[0] for k in keys.values()}, command_hash__in={k[1] for k in keys.values()}
    ).order_by("measured_at", "id")
    latest: dict[tuple[str, str], SoloProfile] = {}
    for row in rows:  # ascending, so the most recent recording of each key stays
        latest[(row.image, row.command_hash)] = row
    return {pk: as_job_profile(latest[key]) for pk, key in keys.items() if key in latest}


def solo_profile_for_job(job: Job) -> ProfileDict:
    """The job's profile, or {} when its image and command were never profiled."""
    return solo_profiles_for_jobs([job]).get(job.pk, {})


def fill_running_task_profiles(snapshot: ClusterSnapshot, loaded: Sequence[Job] = ()) -> None:
    """Add the stored profile (and slowdown tolerance) of every running task the snapshot lacks.

    Entries the backend already supplied win. Task placements carry ``job_id = str(Job.pk)``.
    ``loaded``: Job rows (with their image) the caller read already, e.g. the cycle's running jobs;
    only the others are read here.
    """
    by_job: dict[int, list[str]] = {}
    for placement in snapshot.running:
        if placement.task_id not in snapshot.task_profiles and placement.job_id.isdigit():
            by_job.setdefault(int(placement.job_id), []).append(placement.task_id)
    if not by_job:
        return
    jobs = [job for job in loaded if job.pk in by_job]
    missing = by_job.keys() - {job.pk for job in jobs}
    if missing:
        jobs += Job.objects.filter(pk__in=missing).select_related("image")
    jobs.sort(key=lambda j: (j.created_at, j.pk), reverse=True)  # Job.Meta.ordering, as one query gave
    found = solo_profiles_for_jobs(jobs)
    filled: dict[str, dict[str, float | str]] = {}
    for job in jobs:
        # Unprofiled jobs still carry their tolerance: the filter must protect them by their own limit.
        profile = found.get(job.pk) or {}
        for task_id in by_job[job.pk]:
            filled[task_id] = {**profile, "slowdown_tolerance": job.slowdown_tolerance}
    # A new dict: the backend's snapshot may share its mapping with other readers.
    snapshot.task_profiles = {**filled, **snapshot.task_profiles}

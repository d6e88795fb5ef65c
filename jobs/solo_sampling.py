"""On the local backend the platform profiles solo runs itself, through NVML, when a driver is present.

Kubernetes nodes have the node agent, which posts its samples (``jobs.agent_api``). A machine run by
the local backend has no agent: its GPUs are the platform's own, so beat's ``solo_sample_sweep``
(``jobs.tasks.sample_solo_profiles``, every ``SOLO_SAMPLE_SECONDS``) does the agent's work:

* for every RUNNING task alone on its one GPU (no other task of any job on that GPU) whose image and
  command have no solo profile yet, it reads one NVML sample of that GPU
  (``scheduler.agent.profiling.read_sample``: SM and memory utilisation, the device's used memory,
  which is the job's while it is alone) with the throughput the task reports (the throughput
  contract), at ``t`` = seconds since the task started;
* the samples of one run accumulate in the cache (a restarted run starts over);
* once they span ``SOLO_PROFILE_SECONDS`` past the warm-up (``SOLO_WARMUP_SECONDS``), they become the configuration's
  ``SoloProfile`` (``solo_profile_record``, the same service the agent's endpoint calls).

Without a driver (no ``pynvml``, or NVML does not start) the sweep does nothing and says so once in
the log: virtual GPUs have nothing to sample.

On the simulated backend the ground truth stands in for NVML, so the whole loop (solo profile, then
co-location measurement, then retraining) runs with no GPU. A task whose job names a ground-truth
job type (``SIM_JOB_TYPE``) gets a sample of what that type would show (``simulated_sample``): its
memory and batch size from the ground truth, its throughput as the task reports it (its isolated
throughput while alone), and SM and memory utilisation not measured (NaN in the sample, the
scheduler's unknown; empty in the stored profile), which the Gavel ground truth does not measure, so
the interference model sees them missing as in Gavel's own rows, not as 0 %. ``t`` is in simulated
seconds (real seconds times the backend's time scale), so ``SOLO_PROFILE_SECONDS`` means the same
span of the job's run on both backends. Tasks without a job
type are skipped: they report no throughput. Other backends are skipped (their nodes have agents).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache

from jobs.cluster import get_backend
from jobs.models import SoloProfile, Task
from jobs.profiling_services import command_line, job_configuration, solo_profile_record
from scheduler.agent import profiling
from scheduler.backends.base import ClusterBackend, TaskPhase, TaskStatus

logger = logging.getLogger(__name__)

_KEY = "solo-samples:{task}:{start}"
_KEEP_S = 3600


def _settings_s(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def simulated_sample(profile: dict[str, float | str], t: float, throughput: float | None) -> profiling.Sample:
    """What a simulated task of a ground-truth job type (``profile``: the backend's ``job_profile``)
    shows a sampler ``t`` seconds into its solo run (module docstring): utilisations NaN, not measured."""
    return profiling.Sample(
        t=t,
        gpu_util=math.nan,
        mem_util=math.nan,
        memory_mib=float(profile.get("gpu_memory_mib", 0.0)),
        throughput=throughput,
    )


def solo_sample_sweep(backend: ClusterBackend | None = None, nvml: Any | None = None) -> int:
    """One sampling pass (module docstring); returns the solo profiles recorded by this pass."""
    backend = backend or get_backend()
    kind = getattr(backend, "name", "")
    if kind not in ("local", "simulated"):
        return 0
    running = [
        s
        for s in backend.task_statuses()
        if s.phase is TaskPhase.RUNNING and len(s.gpu_indices) == 1 and s.started_at is not None
    ]
    per_gpu: dict[tuple[str, int], int] = {}
    for s in running:
        per_gpu[(s.node, s.gpu_indices[0])] = per_gpu.get((s.node, s.gpu_indices[0]), 0) + 1
    alone = [s for s in running if per_gpu[(s.node, s.gpu_indices[0])] == 1]
    if not alone:
        return 0
    tasks = {
        t.name: t
        for t in Task.objects.filter(name__in=[s.task_id for s in alone]).select_related("job__image")
    }
    keys = {name: job_configuration(t.job) for name, t in tasks.items()}
    profiled = set(
        SoloProfile.objects.filter(
            image__in={k[0] for k in keys.values()}, command_hash__in={k[1] for k in keys.values()}
        ).values_list("image", "command_hash")
    )
    todo = [s for s in alone if s.task_id in tasks and keys[s.task_id] not in profiled]
    if not todo:
        return 0
    if kind == "simulated":
        return _simulated_pass(backend, todo, tasks, keys)
    try:
        lib = profiling.open_nvml(nvml)
    except profiling.NoNvidiaDriver as exc:
        logger.debug("solo sampling skipped: %s", exc)
        return 0
    models = {(n.name, g.index): g.model for n in backend.snapshot().nodes for g in n.gpus}
    recorded = 0
    now = time.time()
    try:
        for status in todo:
            task = tasks[status.task_id]
            index = status.gpu_indices[0]
            assert status.started_at is not None
            key = _KEY.format(task=status.task_id, start=int(status.started_at))
            sample = profiling.read_sample(lib, index, now - status.started_at)
            sample.throughput = status.throughput
            recorded += _add_sample(
                key, sample, task, keys[status.task_id][0], models.get((status.node, index), "")
            )
    finally:
        with contextlib.suppress(Exception):
            lib.nvmlShutdown()
    return recorded


def _add_sample(
    key: str,
    sample: profiling.Sample,
    task: Task,
    image: str,
    gpu_model: str,
    extra: dict[str, Any] | None = None,
) -> int:
    """Keep ``sample`` with the run's earlier ones; once they span the profile window, record them as
    the configuration's solo profile. Returns 1 when a profile was recorded."""
    span = _settings_s("SOLO_PROFILE_SECONDS", 60.0)
    warmup = _settings_s("SOLO_WARMUP_SECONDS", 10.0)
    samples: list[dict[str, Any]] = [*cache.get(key, []), sample.__dict__]
    if samples[-1]["t"] - max(warmup, samples[0]["t"]) < span:
        cache.set(key, samples, timeout=_KEEP_S)
        return 0
    solo_profile_record(
        image=image,
        command=command_line(task.job.command or [], task.job.args or []),
        gpu_model=gpu_model,
        samples=samples,
        warmup_s=warmup,
        **(extra or {}),
    )
    cache.delete(key)
    return 1


def _simulated_pass(
    backend: ClusterBackend, todo: list[TaskStatus], tasks: dict[str, Task], keys: dict[str, tuple[str, str]]
) -> int:
    known = getattr(backend, "job_profile", None)
    if not callable(known):
        return 0
    scale = float(getattr(backend, "time_scale", 1.0))
    models = {(n.name, g.index): g.model for n in backend.snapshot().nodes for g in n.gpus}
    # The simulated backend's own clock: its tasks' start times are on it (a test's fake clock too).
    now = float(getattr(backend, "clock", time.time)())
    recorded = 0
    for status in todo:
        task = tasks[status.task_id]
        profile = known(task.job.env or {})
        if not profile or status.throughput is None:
            continue
        assert status.started_at is not None
        index = status.gpu_indices[0]
        key = _KEY.format(task=status.task_id, start=int(status.started_at))
        sample = simulated_sample(profile, (now - status.started_at) * scale, status.throughput)
        extra: dict[str, Any] = {"model_family": str(profile.get("model_family", ""))}
        if isinstance(profile.get("batch_size"), float):
            extra["batch_size"] = profile["batch_size"]
        recorded += _add_sample(
            key, sample, task, keys[status.task_id][0], models.get((status.node, index), ""), extra
        )
    return recorded

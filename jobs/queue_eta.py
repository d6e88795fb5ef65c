"""Estimated start times of the waiting jobs (``scheduler.policy.eta``), computed at the cycle's
rounds and kept in the cache for the API (``eta``, ``eta_confidence`` of a queued job).

Expected remaining time of a running job, and run time of a waiting one: its ``max_runtime_seconds``
(source ``limit``), else ``scheduler.policy.eta.RuntimeHistory`` over the completed jobs of the
teams in the estimate (the one definition the simulator's benchmarks use): the same user's jobs of
that image and shape (GPUs, share, replicas), else the team's of that image and shape, else the
team's of that GPU count, else the team's (``history``); for a running job, the time left given how
long it has run. Else everyone's run times (``guess``: the completed jobs of all the teams in the
estimate); without any, unknown. The estimate never reads ``sim_duration_seconds``: that is the
simulated backend's instruction for how long to run (the trace's true duration in a replay), which
no real cluster knows in advance. The
estimate replays the round it is made at (``estimate_starts``'s ``round_s``: the refresh runs at
the cycle's rounds). Best effort: an estimate that fails is logged and leaves the previous one.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable

from django.core.cache import cache

from jobs.lease import scoped_key
from jobs.models import Job
from jobs.policy_settings import round_seconds
from jobs.states import JobStatus
from scheduler.policy.eta import RuntimeHistory, estimate_starts
from scheduler.policy.view import PolicyView

logger = logging.getLogger(__name__)

_ETA_KEY = "jobs:queue-eta"


def eta_key() -> str:
    """The cache key of the last cycle's ETAs."""
    return scoped_key(_ETA_KEY)


HISTORY = 50  # run times kept per pool (RuntimeHistory's window)
HISTORY_JOBS = 500  # latest completed jobs read per team
MAX_STEPS = 100


def _shape(job: Job) -> Hashable:
    return (job.image_id, job.gpus, job.gpu_milli, job.replicas)


def runtime_history(team_ids: Iterable[int]) -> RuntimeHistory:
    """The latest ``HISTORY_JOBS`` succeeded jobs of each team, oldest first, in a ``RuntimeHistory``."""
    history = RuntimeHistory(window=HISTORY)
    done: list[Job] = []
    for team_id in sorted(set(team_ids)):
        latest = (
            Job.objects.filter(
                team_id=team_id,
                status=JobStatus.SUCCEEDED.value,
                started_at__isnull=False,
                finished_at__isnull=False,
            )
            .only(
                "team_id", "user_id", "image_id", "gpus", "gpu_milli", "replicas", "started_at", "finished_at"
            )
            .order_by("-finished_at", "-pk")[:HISTORY_JOBS]
        )
        done.extend(latest)
    for job in sorted(done, key=lambda j: (j.finished_at, j.pk)):
        if job.started_at is None or job.finished_at is None:  # excluded by the query; for the type
            continue
        seconds = max(0.0, (job.finished_at - job.started_at).total_seconds())
        history.add(str(job.team_id), job.gpus, seconds, user=job.user_id, shape=_shape(job))
    return history


def expected_runtime(job: Job, history: RuntimeHistory, elapsed: float = 0.0) -> tuple[float | None, str]:
    """(expected seconds left of ``job`` after running ``elapsed``, its source); see the module
    docstring."""
    if job.max_runtime_seconds:
        return max(0.0, float(job.max_runtime_seconds) - elapsed), "limit"
    # Never ``sim_duration_seconds`` (module docstring): it would make the replay's ETAs an oracle's.
    return history.remaining(str(job.team_id), job.gpus, elapsed, user=job.user_id, shape=_shape(job))


def refresh_etas(
    view: PolicyView, policy: object, jobs: dict[str, Job]
) -> dict[int, tuple[float | None, str]]:
    """Estimate the queue of ``view`` and store {job id: (start, confidence)} for the API."""
    try:
        remaining: dict[str, float | None] = {}
        durations: dict[str, float | None] = {}
        sources: dict[str, str] = {}
        running = Job.objects.in_bulk([int(r.job_id) for r in view.running if r.job_id.isdigit()])
        history = runtime_history(
            [j.team_id for j in running.values()] + [j.team_id for j in jobs.values() if j is not None]
        )
        for r in view.running:
            job = running.get(int(r.job_id)) if r.job_id.isdigit() else None
            remaining[r.job_id], sources[r.job_id] = (
                expected_runtime(job, history, max(0.0, view.now - r.started_at))
                if job is not None
                else (None, "guess")
            )
        for request in view.queue:
            job = jobs.get(request.job_id)
            durations[request.job_id], sources[request.job_id] = (
                expected_runtime(job, history) if job is not None else (None, "guess")
            )
        found = estimate_starts(
            view, policy, remaining=remaining, durations=durations, sources=sources, max_steps=MAX_STEPS,
            round_s=round_seconds(),
        )  # fmt: skip
    except Exception:  # noqa: BLE001  (an estimate must never stop the cycle)
        logger.warning("queue ETA estimate failed", exc_info=True)
        return {}
    etas = {int(j): (e.start_at, e.confidence) for j, e in found.items() if j.isdigit()}
    cache.set(eta_key(), etas, timeout=None)
    return etas


def eta_of(job_id: int) -> tuple[float | None, str | None]:
    """(estimated start, confidence) of a waiting job from the last estimate; (None, None) if none."""
    found = (cache.get(eta_key()) or {}).get(job_id)
    return (found[0], found[1]) if found else (None, None)

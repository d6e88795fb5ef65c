"""Estimated start times of the waiting jobs (``scheduler.policy.eta``), computed at the cycle's
rounds and kept in the cache for the API (``eta``, ``eta_confidence`` of a queued job).

Expected remaining time of a running job, and run time of a waiting one: its ``max_runtime_seconds``
(source ``limit``), else the median run time of the same user's completed jobs of that image and
size, else the team's (``history``), else the duration the simulated backend was given
(``sim_duration_seconds``, a ``guess`` on other backends); without any, unknown. Best effort: an
estimate that fails is logged and leaves the previous one.
"""

from __future__ import annotations

import logging
import statistics
from typing import Any

from django.core.cache import cache

from jobs.models import Job
from jobs.states import JobStatus
from scheduler.policy.eta import estimate_starts
from scheduler.policy.view import PolicyView

logger = logging.getLogger(__name__)

ETA_KEY = "jobs:queue-eta"
HISTORY = 50
MAX_STEPS = 100


def _median_runtime(**where: Any) -> float | None:
    done = (
        Job.objects.filter(
            status=JobStatus.SUCCEEDED.value, started_at__isnull=False, finished_at__isnull=False, **where
        )
        .order_by("-finished_at")
        .values_list("started_at", "finished_at")[:HISTORY]
    )
    seconds = [(end - start).total_seconds() for start, end in done]
    return statistics.median(seconds) if seconds else None


def expected_runtime(job: Job) -> tuple[float | None, str]:
    """(expected run time in seconds, its source) of ``job``; see the module docstring."""
    if job.max_runtime_seconds:
        return float(job.max_runtime_seconds), "limit"
    shape = {"image_id": job.image_id, "gpus": job.gpus, "gpu_milli": job.gpu_milli, "replicas": job.replicas}
    for where in ({"user_id": job.user_id, **shape}, {"team_id": job.team_id, **shape}):
        found = _median_runtime(**where)
        if found is not None:
            return found, "history"
    if job.sim_duration_seconds:
        return float(job.sim_duration_seconds), "guess"
    return None, "guess"


def refresh_etas(
    view: PolicyView, policy: object, jobs: dict[str, Job]
) -> dict[int, tuple[float | None, str]]:
    """Estimate the queue of ``view`` and store {job id: (start, confidence)} for the API."""
    try:
        remaining: dict[str, float | None] = {}
        durations: dict[str, float | None] = {}
        sources: dict[str, str] = {}
        running = Job.objects.in_bulk([int(r.job_id) for r in view.running if r.job_id.isdigit()])
        for r in view.running:
            job = running.get(int(r.job_id)) if r.job_id.isdigit() else None
            total, source = expected_runtime(job) if job is not None else (None, "guess")
            remaining[r.job_id] = None if total is None else max(0.0, total - (view.now - r.started_at))
            sources[r.job_id] = source
        for request in view.queue:
            job = jobs.get(request.job_id)
            durations[request.job_id], sources[request.job_id] = (
                expected_runtime(job) if job is not None else (None, "guess")
            )
        found = estimate_starts(
            view, policy, remaining=remaining, durations=durations, sources=sources, max_steps=MAX_STEPS
        )
    except Exception:  # noqa: BLE001  (an estimate must never stop the cycle)
        logger.warning("queue ETA estimate failed", exc_info=True)
        return {}
    etas = {int(j): (e.start_at, e.confidence) for j, e in found.items() if j.isdigit()}
    cache.set(ETA_KEY, etas, timeout=None)
    return etas


def eta_of(job_id: int) -> tuple[float | None, str | None]:
    """(estimated start, confidence) of a waiting job from the last estimate; (None, None) if none."""
    found = (cache.get(ETA_KEY) or {}).get(job_id)
    return (found[0], found[1]) if found else (None, None)

"""Runtime and GPU-hours of jobs for the jobs list, from the run ledger (quotas.models.RunUsage).

A job's runtime is the time its processes ran, summed over its runs (queue time between the runs of
a preempted or requeued job is not runtime), plus the run going on now. Its GPU-hours are each run's
GPU share times that run's length, the quota's measure (a quarter of a GPU for 4 hours is 1.0).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.utils import timezone

from jobs.models import Job
from quotas.models import RunUsage, UsageEntry


@dataclass(frozen=True)
class JobUsage:
    runtime_seconds: float
    gpu_hours: float


def jobs_usage(*, jobs: list[Job], now: dt.datetime | None = None) -> dict[int, JobUsage]:
    """Runtime and GPU-hours of each of ``jobs`` (the caller has scoped them to the user's teams)."""
    now = now or timezone.now()
    seconds: dict[int, float] = {}
    hours: dict[int, float] = {}
    ids = [job.pk for job in jobs]
    for run in RunUsage.objects.filter(job_id__in=ids).only("job_id", "started_at", "ended_at", "gpu_milli"):
        seconds[run.job_id] = seconds.get(run.job_id, 0.0) + max(
            0.0, (run.ended_at - run.started_at).total_seconds()
        )
        hours[run.job_id] = hours.get(run.job_id, 0.0) + run.gpu_hours
    held = dict(
        UsageEntry.objects.filter(job_id__in=ids, released_at__isnull=True).values_list("job_id", "gpu_milli")
    )
    legacy_hours: dict[int, float] = {}
    for job_id, entry_hours in UsageEntry.objects.filter(
        job_id__in=ids, released_at__isnull=False
    ).values_list("job_id", "gpu_hours"):
        legacy_hours[job_id] = legacy_hours.get(job_id, 0.0) + entry_hours
    out: dict[int, JobUsage] = {}
    for job in jobs:
        milli = held.get(job.pk, job.total_gpu_milli)
        runtime, gpu_hours = seconds.get(job.pk, 0.0), hours.get(job.pk, 0.0)
        if job.run_started_at is not None:  # the current run, not in the ledger until it ends
            current = max(0.0, (now - job.run_started_at).total_seconds())
            runtime += current
            gpu_hours += milli / 1000.0 * current / 3600.0
        elif job.pk not in seconds and job.started_at is not None:
            # Ran before the run ledger existed: from its first start to its end.
            runtime = max(0.0, ((job.finished_at or now) - job.started_at).total_seconds())
            gpu_hours = legacy_hours.get(job.pk, milli / 1000.0 * runtime / 3600.0)
        out[job.pk] = JobUsage(runtime_seconds=round(runtime, 3), gpu_hours=round(gpu_hours, 6))
    return out

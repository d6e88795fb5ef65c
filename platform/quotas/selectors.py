"""Reads of quotas: each team's usage against its limits, including GPU-hours this month."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet, Sum
from django.utils import timezone

from accounts.models import Team
from quotas.models import Quota, RunUsage, UsageEntry, UserUsage


def month_start(now: datetime | None = None) -> datetime:
    now = now or timezone.now()
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _overlap_hours(start: datetime, end: datetime, window_start: datetime) -> float:
    return max(0.0, (end - max(start, window_start)).total_seconds() / 3600.0)


def gpu_hours_this_month(*, team: Team, now: datetime | None = None) -> float:
    """GPU-hours ``team`` consumed since the first of this month (UTC).

    A job counts while it runs, not while it waits: queue time uses no GPU, also between the runs of
    a preempted or requeued job. Each finished run in the run ledger (``RunUsage``) counts its GPU
    share times the part of it in this month, and a job running now adds its current run
    (``Job.run_started_at``). Jobs without a run in the ledger (they ran before it existed) count
    from ``Job.started_at``: a finished entry's ``gpu_hours * overlap / duration``, a held one
    ``gpu_milli / 1000 * hours running this month``.
    """
    now = now or timezone.now()
    start = month_start(now)
    entries = (
        UsageEntry.objects.filter(team=team)
        .filter(Q(released_at__isnull=True) | Q(released_at__gte=start))
        .select_related("job")
        .only(
            "gpu_milli", "gpu_hours", "reserved_at", "released_at", "job__started_at", "job__run_started_at"
        )
    )
    runs: dict[int, list[RunUsage]] = {}
    for run in RunUsage.objects.filter(team=team, ended_at__gte=start):
        runs.setdefault(run.job_id, []).append(run)
    with_runs = set(RunUsage.objects.filter(team=team).values_list("job_id", flat=True).distinct())
    total = 0.0
    for entry in entries:
        if entry.job_id in with_runs or entry.job.run_started_at is not None:
            for run in runs.get(entry.job_id, []):
                total += run.gpu_milli / 1000.0 * _overlap_hours(run.started_at, run.ended_at, start)
            if entry.released_at is None and entry.job.run_started_at is not None:
                total += entry.gpu_milli / 1000.0 * _overlap_hours(entry.job.run_started_at, now, start)
            continue
        began = entry.job.started_at or (entry.reserved_at if entry.released_at else None)
        if began is None:  # still queued: no GPU time yet
            continue
        if entry.released_at is None:
            total += entry.gpu_milli / 1000.0 * _overlap_hours(began, now, start)
            continue
        duration = (entry.released_at - began).total_seconds() / 3600.0
        if duration <= 0:
            continue
        total += entry.gpu_hours * min(1.0, _overlap_hours(began, entry.released_at, start) / duration)
    return total


@dataclass(frozen=True)
class QuotaUsage:
    """Usage vs limits of one team. GPU amounts in milli-GPU; ``caller_*`` is the asking user's share."""

    team_id: int
    team_slug: str
    team_name: str
    guaranteed_gpu_milli: int
    max_gpu_milli: int
    used_gpu_milli: int
    max_concurrent_jobs: int
    used_jobs: int
    per_user_gpu_milli: int
    caller_gpu_milli: int
    gpu_hours_per_month: float
    gpu_hours_this_month: float
    updated_at: datetime

    @property
    def free_gpu_milli(self) -> int:
        return max(0, self.max_gpu_milli - self.used_gpu_milli)


def quota_usage(*, team: Team, user: Any = None) -> QuotaUsage:
    """Usage vs limits of ``team``; a team without a quota row reports the defaults and no usage."""
    quota = Quota.objects.filter(team=team).first() or Quota(team=team)
    caller = 0
    if user is not None and getattr(user, "is_authenticated", False):
        caller = (
            UserUsage.objects.filter(team=team, user=user).values_list("used_gpu_milli", flat=True).first()
            or 0
        )
    return QuotaUsage(
        team_id=team.pk,
        team_slug=team.slug,
        team_name=team.name,
        guaranteed_gpu_milli=quota.guaranteed_gpu_milli,
        max_gpu_milli=quota.max_gpu_milli,
        used_gpu_milli=quota.used_gpu_milli,
        max_concurrent_jobs=quota.max_concurrent_jobs,
        used_jobs=quota.used_jobs,
        per_user_gpu_milli=quota.per_user_gpu_milli,
        caller_gpu_milli=caller,
        gpu_hours_per_month=quota.gpu_hours_per_month,
        gpu_hours_this_month=round(gpu_hours_this_month(team=team), 6),
        updated_at=quota.updated_at,
    )


def quota_usages(*, teams: QuerySet[Team] | list[Team], user: Any = None) -> list[QuotaUsage]:
    return [quota_usage(team=team, user=user) for team in teams]


def attained_gpu_seconds(*, job_ids: list[int]) -> dict[int, float]:
    """Attained service (GPU-seconds, 2D-LAS measure) of each job over its finished runs, from the run
    ledger; jobs that never finished a run are absent. The current run's part is the caller's to add."""
    rows = (
        RunUsage.objects.filter(job_id__in=job_ids)
        .order_by()
        .values("job_id")
        .annotate(total=Sum("gpu_seconds"))
        .values_list("job_id", "total")
    )
    return {job_id: float(total or 0.0) for job_id, total in rows}


def job_runs(*, job_id: int) -> QuerySet[RunUsage]:
    return RunUsage.objects.filter(job_id=job_id).order_by("started_at", "id")


def run_gpu_hours(*, job_id: int) -> float | None:
    """GPU-hours of the job's finished runs (its GPU share x run time), or None when the ledger has no
    run of it (a job that never ran, or ran before the run ledger existed)."""
    runs = list(job_runs(job_id=job_id))
    if not runs:
        return None
    return sum(run.gpu_hours for run in runs)

"""Reads of quotas: each team's usage against its limits (GPU-hours this month, budget, decayed usage
and fair-share factor, waiting jobs), and the cohort's state as the scheduling policy sees it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import F, Q, QuerySet, Sum
from django.utils import timezone

from accounts.models import Team
from quotas.models import Quota, QuotaEvent, RunUsage, UsageEntry, UserUsage
from scheduler.policy import fair_share
from scheduler.policy.cohort import TeamQuota


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
    counted: set[int] = set()  # a job admitted more than once has one entry per admission
    for entry in entries:
        if entry.job_id in with_runs or entry.job.run_started_at is not None:
            if entry.job_id in counted:
                continue
            counted.add(entry.job_id)
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


def _half_life_s() -> float:
    return float(getattr(settings, "QUOTA_USAGE_HALF_LIFE_DAYS", 7.0)) * 86400.0


def decayed_gpu_hours(*, now: datetime | None = None, half_life_s: float | None = None) -> dict[int, float]:
    """Each team's GPU-hours with an exponential decay (``QUOTA_USAGE_HALF_LIFE_DAYS``), by team id:
    the finished runs of the run ledger plus the current runs of running jobs, each counting its GPU
    share (``scheduler.policy.fair_share.decayed_gpu_hours``, exact). Runs older than 30 half-lives
    add less than a billionth and are not read."""
    from jobs.models import Job
    from jobs.states import RUNS

    now = now or timezone.now()
    half = _half_life_s() if half_life_s is None else half_life_s
    at = now.timestamp()
    runs: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
    ledger = RunUsage.objects.all()
    if half > 0:
        ledger = ledger.filter(ended_at__gte=now - timedelta(seconds=30 * half))
    for team_id, started, ended, milli in ledger.values_list(
        "team_id", "started_at", "ended_at", "gpu_milli"
    ):
        runs[team_id].append((started.timestamp(), ended.timestamp(), milli / 1000.0))
    current = Job.objects.filter(status__in=[s.value for s in RUNS], run_started_at__isnull=False)
    for job in current.only("team_id", "run_started_at", "gpus", "gpu_milli", "replicas"):
        runs[job.team_id].append((job.run_started_at.timestamp(), at, job.total_gpu_milli / 1000.0))
    return {team_id: fair_share.decayed_gpu_hours(r, now=at, half_life_s=half) for team_id, r in runs.items()}


def fair_share_factors(*, now: datetime | None = None) -> tuple[dict[int, float], dict[int, float]]:
    """(decayed GPU-hours, fair-share factor) of every team with a quota, by team id."""
    usage = decayed_gpu_hours(now=now)
    guarantees = {
        team_id: float(g) for team_id, g in Quota.objects.values_list("team_id", "guaranteed_gpu_milli")
    }
    factors = fair_share.fair_share_factors(
        {str(t): u for t, u in usage.items()}, {str(t): g for t, g in guarantees.items()}
    )
    return ({t: usage.get(t, 0.0) for t in guarantees}, {t: factors[str(t)] for t in guarantees})


def cohort_quotas(
    *, held_for: dict[int, int] | None = None, now: datetime | None = None
) -> dict[str, TeamQuota]:
    """The policy's view of every team's quota (``scheduler.policy.cohort.TeamQuota``), by team slug.

    ``held_for``: milli-GPU of each team's jobs waiting outside the policy's queue for GPUs being
    freed for them (by team id)."""
    from quotas.services import team_quota

    _usage, factors = fair_share_factors(now=now)
    users: dict[int, dict[str, int]] = defaultdict(dict)
    for team_id, username, milli in UserUsage.objects.filter(used_gpu_milli__gt=0).values_list(
        "team_id", "user__username", "used_gpu_milli"
    ):
        users[team_id][username] = milli
    out: dict[str, TeamQuota] = {}
    for quota in Quota.objects.select_related("team"):
        state = team_quota(
            quota=quota,
            team=quota.team,
            user_used=users.get(quota.team_id, {}),
            budget_used=gpu_hours_this_month(team=quota.team, now=now),
        )
        out[quota.team.slug] = replace(
            state,
            fair_share=factors.get(quota.team_id, 1.0),
            held_for_milli=(held_for or {}).get(quota.team_id, 0),
        )
    return out


@dataclass(frozen=True)
class WaitingJob:
    job_id: int
    name: str
    reason: str


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
    lending_limit_gpu_milli: int | None = None
    decayed_gpu_hours: float = 0.0
    fair_share_factor: float = 1.0
    budget_gpu_hours: float = 0.0
    waiting_jobs: tuple[WaitingJob, ...] = ()

    @property
    def free_gpu_milli(self) -> int:
        return max(0, self.max_gpu_milli - self.used_gpu_milli)

    @property
    def borrowed_gpu_milli(self) -> int:
        """What the team holds beyond its guarantee now (idle GPUs lent to it by the cohort)."""
        return max(0, self.used_gpu_milli - self.guaranteed_gpu_milli)

    @property
    def budget_used_fraction(self) -> float:
        return self.gpu_hours_this_month / self.budget_gpu_hours if self.budget_gpu_hours > 0 else 1.0

    @property
    def budget_warning(self) -> bool:
        """At least 80 % of this month's budget is used (the dashboard's warning)."""
        from quotas.services import BUDGET_WARNING_FRACTION

        return self.budget_used_fraction >= BUDGET_WARNING_FRACTION


WAITING_SHOWN = 50


def _waiting(team: Team) -> tuple[WaitingJob, ...]:
    from jobs.models import Job
    from jobs.states import JobStatus

    rows = (
        Job.objects.filter(team=team, status=JobStatus.QUEUED.value)
        .order_by(F("queue_position").asc(nulls_last=True), "submitted_at", "id")
        .values_list("pk", "name", "pending_reason")[:WAITING_SHOWN]
    )
    return tuple(WaitingJob(job_id=pk, name=name, reason=reason) for pk, name, reason in rows)


def quota_usage(
    *, team: Team, user: Any = None, shares: tuple[dict[int, float], dict[int, float]] | None = None
) -> QuotaUsage:
    """Usage vs limits of ``team``; a team without a quota row reports the defaults and no usage.
    ``shares``: :func:`fair_share_factors` when the caller computed it already (one for all teams)."""
    from quotas.services import budget_gpu_hours

    quota = Quota.objects.filter(team=team).first() or Quota(team=team)
    caller = 0
    if user is not None and getattr(user, "is_authenticated", False):
        caller = (
            UserUsage.objects.filter(team=team, user=user).values_list("used_gpu_milli", flat=True).first()
            or 0
        )
    usage, factors = shares if shares is not None else fair_share_factors()
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
        lending_limit_gpu_milli=quota.lending_limit_gpu_milli,
        decayed_gpu_hours=round(usage.get(team.pk, 0.0), 6),
        fair_share_factor=round(factors.get(team.pk, 1.0), 6),
        budget_gpu_hours=budget_gpu_hours(quota=quota),
        waiting_jobs=_waiting(team),
    )


def quota_usages(*, teams: QuerySet[Team] | list[Team], user: Any = None) -> list[QuotaUsage]:
    shares = fair_share_factors()
    return [quota_usage(team=team, user=user, shares=shares) for team in teams]


def budget_events(*, team: Team, limit: int = 20) -> QuerySet[QuotaEvent]:
    return QuotaEvent.objects.filter(team=team).order_by("-created_at", "-id")[:limit]


def attained_gpu_seconds(*, job_ids: list[int]) -> dict[int, float]:
    """Attained service (GPU-seconds, 2D-LAS measure) of each job over its finished runs, from the run
    ledger; jobs that never finished a run are absent. The current run's part is the caller's to add.

    The scheduling cycle asks this of thousands of jobs: on PostgreSQL the ids go as one array
    parameter, where Django prepares an ``__in`` list value by value (about 0.3 s of a cycle at 5,000
    waiting and 1,213 running). The sums are the same."""
    if connection.vendor == "postgresql" and job_ids:
        table = connection.ops.quote_name(RunUsage._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT job_id, SUM(gpu_seconds) FROM {table} WHERE job_id = ANY(%s) GROUP BY job_id",
                [list(job_ids)],
            )
            return {int(job_id): float(total or 0.0) for job_id, total in cursor.fetchall()}
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


def borrowed_gpu_milli(*, job_id: int) -> int:
    """Milli-GPU of the job's current admission that is its team's excess over its guarantee now (the
    newest admissions carry it: quotas.services._remark); 0: not borrowing, or not admitted now."""
    value = (
        UsageEntry.objects.filter(job_id=job_id, released_at__isnull=True)
        .values_list("borrowed_gpu_milli", flat=True)
        .first()
    )
    return int(value or 0)


def budget_warnings(*, teams: QuerySet[Team] | list[Team]) -> list[QuotaUsage]:
    """Usage of those of ``teams`` past 80 % of this month's budget (the dashboard's warnings)."""
    from quotas.services import BUDGET_WARNING_FRACTION, budget_gpu_hours

    out = []
    for quota in Quota.objects.filter(team__in=list(teams)).select_related("team"):
        budget = budget_gpu_hours(quota=quota)
        if budget > 0 and gpu_hours_this_month(team=quota.team) >= BUDGET_WARNING_FRACTION * budget:
            out.append(quota_usage(team=quota.team))
    return out

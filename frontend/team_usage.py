"""Reads for the team lead's Usage page: GPUs in use against the quota, GPU-hours of a month by user
and by day, the team's waiting jobs with their reasons, and the last 7 days.

GPU-hours are the usage reports' (observability.usage, from the run ledger): each run counts its GPU
share for the part of it inside the window, a running job its current run up to now; waiting time,
also between the runs of a preempted job, counts nothing. So the users' bars, the days' points and
``GET /api/v1/usage/?group_by=user&team=<slug>&month=<month>`` all add up to the same total.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from accounts.models import Team
from accounts.selectors import teams_for_user
from frontend.selectors import WAITING
from jobs.models import Job
from jobs.selectors import queue_positions
from jobs.states import JobStatus
from observability import usage
from quotas.api import is_quota_admin
from quotas.selectors import QuotaUsage, month_start, quota_usage

FINISHED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED)
HISTORY_DAYS = 7


class BadMonth(ValueError):
    """``month`` is not YYYY-MM, or lies in the future."""


def usage_teams(user: Any) -> QuerySet[Team]:
    """Teams whose Usage page ``user`` may read: their own (any role), every team for quota admins
    (they set the limits the page measures against), as ``GET /api/v1/usage/`` scopes its reports."""
    if is_quota_admin(user):
        return Team.objects.order_by("name")
    return teams_for_user(user)


def parse_month(text: str | None, *, now: dt.datetime) -> dt.datetime:
    """The first instant (UTC) of month ``YYYY-MM``; this month when ``text`` is empty."""
    if not text:
        return month_start(now)
    try:
        start, _ = usage.parse_month(text)
    except ValueError as exc:
        raise BadMonth(str(exc)) from None
    if start > now:
        raise BadMonth("That month has not begun yet.")
    return start


def _hours(row: dict[str, object]) -> float:
    """The ``gpu_hours`` of a report row (a float there; the rows are typed loosely)."""
    value = row["gpu_hours"]
    return float(value) if isinstance(value, int | float) else 0.0


def daily_hours(
    team: Team, *, start: dt.datetime, end: dt.datetime, now: dt.datetime
) -> list[tuple[dt.date, float]]:
    """GPU-hours of ``team`` per UTC day from the day of ``start`` to the day before ``end``, across
    month boundaries (the reports' days, month by month)."""
    out: list[tuple[dt.date, float]] = []
    month = month_start(start)
    while month < end:
        for row in usage.daily_usage(team.slug, f"{month:%Y-%m}", now=now):
            day = dt.date.fromisoformat(str(row["day"]))
            if start.date() <= day < end.date():
                out.append((day, _hours(row)))
        month = (month + dt.timedelta(days=32)).replace(day=1)
    return out


@dataclass(frozen=True)
class WaitingJob:
    job: Job
    position: int | None


@dataclass(frozen=True)
class DayActivity:
    day: dt.date
    gpu_hours: float
    submitted: int
    succeeded: int
    failed: int


@dataclass(frozen=True)
class TeamUsagePage:
    team: Team
    month: dt.datetime
    quota: QuotaUsage
    month_hours: float
    by_user: list[tuple[str, float]]
    by_day: list[tuple[dt.date, float]]
    waiting: list[WaitingJob]
    last_days: list[DayActivity]

    @property
    def borrowed_gpu_milli(self) -> int:
        """GPU share in use beyond the guarantee (borrowed from idle capacity, reclaimable)."""
        return max(0, self.quota.used_gpu_milli - self.quota.guaranteed_gpu_milli)


def _round(hours: float) -> float:
    return round(hours, 6)


def _last_days(team: Team, *, now: dt.datetime) -> list[DayActivity]:
    today = dt.datetime.combine(now.date(), dt.time(), tzinfo=dt.UTC)
    start = today - dt.timedelta(days=HISTORY_DAYS - 1)
    hours = daily_hours(team, start=start, end=today + dt.timedelta(days=1), now=now)
    jobs = Job.objects.filter(team=team)
    submitted: dict[dt.date, int] = defaultdict(int)
    for when in jobs.filter(submitted_at__gte=start).values_list("submitted_at", flat=True):
        submitted[when.astimezone(dt.UTC).date()] += 1
    ended: dict[tuple[dt.date, str], int] = defaultdict(int)
    finished = jobs.filter(finished_at__gte=start, status__in=[s.value for s in FINISHED])
    for when, status in finished.values_list("finished_at", "status"):
        ended[(when.astimezone(dt.UTC).date(), status)] += 1
    return [
        DayActivity(
            day=day,
            gpu_hours=_round(h),
            submitted=submitted[day],
            succeeded=ended[(day, JobStatus.SUCCEEDED.value)],
            failed=ended[(day, JobStatus.FAILED.value)],
        )
        for day, h in hours
    ]


def team_usage_page(
    *, user: Any, team_id: int, month: str | None = None, now: dt.datetime | None = None
) -> TeamUsagePage | None:
    """Everything the Usage page of team ``team_id`` shows, or None when ``user`` is not in the team
    (the view answers 404). Raises BadMonth for a malformed or future ``month``."""
    team = usage_teams(user).filter(pk=team_id).first()
    if team is None:
        return None
    now = now or timezone.now()
    start = parse_month(month, now=now)
    label = f"{start:%Y-%m}"
    by_user = sorted(
        (
            (str(row["user"]), _hours(row))
            for row in usage.usage_report(group_by=["user"], month=label, team=team.slug, now=now)
        ),
        key=lambda p: (-p[1], p[0]),
    )
    by_day = [
        (dt.date.fromisoformat(str(r["day"])), _hours(r))
        for r in usage.daily_usage(team.slug, label, now=now)
    ]
    waiting_jobs = list(
        Job.objects.filter(team=team, status__in=[s.value for s in WAITING]).select_related("user", "image")
    )
    positions = queue_positions([job.pk for job in waiting_jobs if job.status == JobStatus.QUEUED.value])
    waiting = sorted(
        (WaitingJob(job, positions.get(job.pk)) for job in waiting_jobs),
        key=lambda w: (w.position is None, w.position or 0, w.job.submitted_at or w.job.created_at),
    )
    return TeamUsagePage(
        team=team,
        month=start,
        quota=quota_usage(team=team, user=user),
        month_hours=_round(sum(hours for _, hours in by_user)),
        by_user=by_user,
        by_day=by_day,
        waiting=waiting,
        last_days=_last_days(team, now=now),
    )

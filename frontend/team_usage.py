"""Reads for the team lead's Usage page: GPUs in use against the quota, GPU-hours of a month by user
and by day, the team's waiting jobs with their reasons, and the last 7 days.

GPU-hours come from the usage ledger by the rules of quotas.selectors.gpu_hours_this_month: each
finished run in ``RunUsage`` counts its GPU share for the part of it inside the window, a running
job adds its current run, and a job with no run in the ledger counts from ``Job.started_at``. So
the page's month total equals the quota's "GPU-hours this month", and the users' bars and the days'
points both add up to it.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.utils import timezone

from accounts.models import Team
from accounts.selectors import teams_for_user
from frontend.selectors import WAITING, UsageSpan
from jobs.models import Job
from jobs.selectors import queue_positions
from jobs.states import JobStatus
from quotas.models import RunUsage, UsageEntry
from quotas.selectors import QuotaUsage, month_start, quota_usage

FINISHED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED)
HISTORY_DAYS = 7


class BadMonth(ValueError):
    """``month`` is not YYYY-MM, or lies in the future."""


def parse_month(text: str | None, *, now: dt.datetime) -> dt.datetime:
    """The first instant (UTC) of month ``YYYY-MM``; this month when ``text`` is empty."""
    if not text:
        return month_start(now)
    try:
        year, month = (int(part) for part in text.split("-"))
        start = dt.datetime(year, month, 1, tzinfo=dt.UTC)
    except ValueError:
        raise BadMonth("Give the month as YYYY-MM, for example 2026-11.") from None
    if start > now:
        raise BadMonth("That month has not begun yet.")
    return start


def next_month(start: dt.datetime) -> dt.datetime:
    return (start + dt.timedelta(days=32)).replace(day=1)


@dataclass(frozen=True)
class UserSpan:
    """One stretch of GPU use of one user (see frontend.selectors.UsageSpan)."""

    username: str
    span: UsageSpan


def team_spans(*, team: Team, since: dt.datetime) -> list[UserSpan]:
    """Every stretch of GPU use of ``team`` that reaches past ``since``, with who used it."""
    spans: list[UserSpan] = []
    for run in (
        RunUsage.objects.filter(team=team, ended_at__gte=since).select_related("job__user").order_by("id")
    ):
        spans.append(
            UserSpan(
                run.job.user.username,
                UsageSpan(
                    gpu_milli=run.gpu_milli, start=run.started_at, end=run.ended_at, gpu_hours=run.gpu_hours
                ),
            )
        )
    with_runs = set(RunUsage.objects.filter(team=team).values_list("job_id", flat=True).distinct())
    entries = (
        UsageEntry.objects.filter(team=team)
        .filter(Q(released_at__isnull=True) | Q(released_at__gte=since))
        .select_related("job", "user")
    )
    for entry in entries:
        user = entry.user.username
        job = entry.job
        if entry.job_id in with_runs or job.run_started_at is not None:
            # The finished runs are in the ledger already; add the run going on now.
            if entry.released_at is None and job.run_started_at is not None:
                spans.append(UserSpan(user, UsageSpan(entry.gpu_milli, job.run_started_at, None, None)))
            continue
        began = job.started_at or (entry.reserved_at if entry.released_at else None)
        if began is None:  # still queued: no GPU time yet
            continue
        hours = entry.gpu_hours if entry.released_at else None
        spans.append(UserSpan(user, UsageSpan(entry.gpu_milli, began, entry.released_at, hours)))
    return spans


def _hours_between(span: UsageSpan, lo: dt.datetime, hi: dt.datetime, now: dt.datetime) -> float:
    """GPU-hours of ``span`` inside [lo, hi): its GPU share for a run, or a finished legacy entry's
    recorded hours spread evenly over its duration."""
    end = span.end or now
    duration = (end - span.start).total_seconds() / 3600.0
    if duration <= 0:
        return 0.0
    inside = (min(end, hi) - max(span.start, lo)).total_seconds() / 3600.0
    if inside <= 0:
        return 0.0
    rate = span.gpu_hours / duration if span.gpu_hours is not None else span.gpu_milli / 1000.0
    return rate * inside


def hours_by_day(
    spans: Iterable[UsageSpan], *, start: dt.datetime, end: dt.datetime, now: dt.datetime
) -> list[tuple[dt.date, float]]:
    """GPU-hours per UTC day in [start, end), one entry per day (zeros included)."""
    days: list[tuple[dt.date, float]] = []
    listed = list(spans)
    day = start
    while day < end:
        following = min(end, dt.datetime.combine(day.date() + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC))
        days.append((day.date(), sum(_hours_between(s, day, following, now) for s in listed)))
        day = following
    return days


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
    role: str
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
    spans = [s.span for s in team_spans(team=team, since=start)]
    hours = hours_by_day(spans, start=start, end=min(now, today + dt.timedelta(days=1)), now=now)
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
    team = teams_for_user(user).filter(pk=team_id).first()
    if team is None:
        return None
    now = now or timezone.now()
    start = parse_month(month, now=now)
    end = min(now, next_month(start))
    spans = team_spans(team=team, since=start)
    per_user: dict[str, float] = defaultdict(float)
    for item in spans:
        per_user[item.username] += _hours_between(item.span, start, end, now)
    by_user = sorted(
        ((name, _round(hours)) for name, hours in per_user.items() if hours > 0), key=lambda p: (-p[1], p[0])
    )
    by_day = [
        (day, _round(h)) for day, h in hours_by_day([s.span for s in spans], start=start, end=end, now=now)
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
        role=team.role,  # type: ignore[attr-defined]
        month=start,
        quota=quota_usage(team=team, user=user),
        month_hours=_round(sum(per_user.values())),
        by_user=by_user,
        by_day=by_day,
        waiting=waiting,
        last_days=_last_days(team, now=now),
    )

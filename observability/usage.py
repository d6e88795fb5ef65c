"""GPU-hour reports from the run ledger (quotas.RunUsage): per team, user, image and month.

A job's GPU-hours are the sum over its runs of its GPU share (``RunUsage.gpu_milli / 1000``, all
replicas) times the run's length; queue time, also between the runs of a preempted or retried job,
uses no GPU. A job running now adds its current run up to ``now``. A run that spans a month boundary
counts in each month for the part inside it. Fractional jobs count their share (250 milli-GPU for
four hours is one GPU-hour). Jobs that ran before the run ledger existed are not counted.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from django.utils import timezone

GROUP_KEYS = ("team", "user", "image", "month")
# ASCII digits only, the whole string (no trailing newline): what the OpenAPI pattern says too.
MONTH_RE = re.compile(r"([0-9]{4})-([0-9]{2})")


@dataclass(frozen=True)
class Run:
    """One run of a job: ``gpu_milli`` held from ``start`` to ``end``."""

    team: str
    user: str
    image: str
    gpu_milli: int
    start: dt.datetime
    end: dt.datetime


def parse_month(month: str) -> tuple[dt.datetime, dt.datetime]:
    """``"YYYY-MM"`` -> [first instant of the month, first instant of the next), UTC.
    Raises ValueError with a message for anything else."""
    match = MONTH_RE.fullmatch(month or "")
    if not match or not 1 <= int(match.group(2)) <= 12 or int(match.group(1)) < 1970:
        raise ValueError("Give the month as YYYY-MM, e.g. 2026-11.")
    start = dt.datetime(int(match.group(1)), int(match.group(2)), 1, tzinfo=dt.UTC)
    return start, _next_month(start)


def parse_group_by(value: str | list[str] | None) -> list[str]:
    """``"team,user"`` (or a list) -> ["team", "user"]; ValueError naming the unknown keys."""
    if value is None:
        return ["team"]
    keys = value.split(",") if isinstance(value, str) else list(value)
    unknown = [k for k in keys if k not in GROUP_KEYS]
    if unknown:
        raise ValueError(
            f"Group by any of {', '.join(GROUP_KEYS)} (comma-separated); unknown: {', '.join(repr(k) for k in unknown)}."
        )
    return list(dict.fromkeys(keys))


def _floor_day(at: dt.datetime) -> dt.datetime:
    return at.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _next_month(start: dt.datetime) -> dt.datetime:
    return (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )


def _months(start: dt.datetime, end: dt.datetime) -> Iterator[tuple[str, dt.datetime, dt.datetime]]:
    """The months that [start, end) touches, with the part of it inside each."""
    cursor = start.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    while cursor < end:
        following = _next_month(cursor)
        lo, hi = max(start, cursor), min(end, following)
        if hi > lo:
            yield f"{cursor:%Y-%m}", lo, hi
        cursor = following


def ledger_runs(
    *,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    teams: list[str] | None = None,
    now: dt.datetime | None = None,
) -> list[Run]:
    """Finished runs from the ledger plus the current runs of jobs running now, overlapping
    [since, until), for the teams with these slugs (all when None)."""
    from jobs.models import Job
    from jobs.states import RUNS
    from quotas.models import RunUsage

    now = now or timezone.now()
    finished = RunUsage.objects.select_related("team", "job__user", "job__image")
    current = Job.objects.filter(
        status__in=[s.value for s in RUNS], run_started_at__isnull=False
    ).select_related("team", "user", "image")
    if since is not None:
        finished = finished.filter(ended_at__gt=since)
    if until is not None:
        finished = finished.filter(started_at__lt=until)
        current = current.filter(run_started_at__lt=until)
    if teams is not None:
        finished = finished.filter(team__slug__in=teams)
        current = current.filter(team__slug__in=teams)
    runs = [
        Run(
            team=r.team.slug,
            user=r.job.user.username,
            image=f"{r.job.image.name}:{r.job.image.tag}",
            gpu_milli=r.gpu_milli,
            start=r.started_at,
            end=r.ended_at,
        )
        for r in finished
    ]
    for j in current:
        began = j.run_started_at
        if began is None:  # filtered out above; keeps the type checker informed
            continue
        runs.append(
            Run(
                team=j.team.slug,
                user=j.user.username,
                image=f"{j.image.name}:{j.image.tag}",
                gpu_milli=j.total_gpu_milli,
                start=began,
                end=max(now, began),
            )
        )
    return runs


def usage_report(
    *,
    group_by: list[str],
    month: str | None = None,
    team: str | None = None,
    teams: list[str] | None = None,
    now: dt.datetime | None = None,
) -> list[dict[str, object]]:
    """GPU-hours grouped by ``group_by`` (any of team, user, image, month), for one month
    (``"YYYY-MM"``) or all time, for one team slug and/or the teams in ``teams`` (all when both are None).

    Rows: the group keys plus ``gpu_hours`` (rounded to 6 decimals), sorted by the keys; groups with
    no use are absent. With ``month`` given every row carries ``"month"`` too.
    """
    keys = parse_group_by(group_by)
    since, until = parse_month(month) if month else (None, None)
    scope = teams
    if team is not None:
        scope = [team] if scope is None or team in scope else []
    if month and "month" not in keys:
        keys = [*keys, "month"]
    totals: dict[tuple[str, ...], float] = defaultdict(float)
    for run in ledger_runs(since=since, until=until, teams=scope, now=now):
        start = max(run.start, since) if since else run.start
        end = min(run.end, until) if until else run.end
        for name, lo, hi in _months(start, end):
            values = {"team": run.team, "user": run.user, "image": run.image, "month": name}
            hours = run.gpu_milli / 1000.0 * (hi - lo).total_seconds() / 3600.0
            totals[tuple(values[k] for k in keys)] += hours
    return [
        {**dict(zip(keys, group, strict=True)), "gpu_hours": round(hours, 6)}
        for group, hours in sorted(totals.items())
        if hours > 0
    ]


def daily_usage(team: str, month: str, *, now: dt.datetime | None = None) -> list[dict[str, object]]:
    """GPU-hours of team ``team`` (slug) per UTC day of ``month`` ("YYYY-MM"): every day of the month
    up to today, zeros included; the days add up to ``usage_report(group_by=["team"], month=month)``."""
    now = now or timezone.now()
    since, until = parse_month(month)
    # The current month stops at today; past (and future) months list all their days.
    end = _floor_day(now) + dt.timedelta(days=1) if since <= now < until else until
    days = [since + dt.timedelta(days=i) for i in range((end - since).days)]
    hours = dict.fromkeys(days, 0.0)
    for run in ledger_runs(since=since, until=until, teams=[team], now=now):
        start, end = max(run.start, since), min(run.end, until)
        for day in days:
            lo, hi = max(start, day), min(end, day + dt.timedelta(days=1))
            if hi > lo:
                hours[day] += run.gpu_milli / 1000.0 * (hi - lo).total_seconds() / 3600.0
    return [{"day": f"{day:%Y-%m-%d}", "gpu_hours": round(h, 6)} for day, h in hours.items()]


def usage_csv(rows: list[dict[str, object]], group_by: list[str]) -> str:
    """The report as CSV: the group columns (and month when present), then gpu_hours."""
    columns = [k for k in GROUP_KEYS if k in group_by or (rows and k in rows[0])] + ["gpu_hours"]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (f"{row[k]:.6f}" if k == "gpu_hours" else row[k]) for k in columns})
    return out.getvalue()

"""Reads for the portal's pages. Everything is scoped to the caller's teams, like the REST API."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.models import Role, Team
from accounts.selectors import team_members, teams_for_user
from images.models import JobImage
from jobs.models import Job
from jobs.selectors import preemption_counts, queue_order
from jobs.states import JobStatus
from quotas.models import RunUsage, UsageEntry
from quotas.selectors import QuotaUsage, month_start, quota_usage

# Statuses the dashboard counts as "running" (holding GPUs) and "waiting" (not placed yet).
RUNNING = (
    JobStatus.ADMITTED,
    JobStatus.STARTING,
    JobStatus.RUNNING,
    JobStatus.PREEMPTING,
    JobStatus.STOPPING,
)
WAITING = (JobStatus.SUBMITTED, JobStatus.QUEUED, JobStatus.REQUEUED)


def writable_teams(*, user: Any) -> list[Team]:
    """Teams in which ``user`` may submit jobs (owner or member)."""
    return [t for t in teams_for_user(user) if t.role in (Role.OWNER, Role.MEMBER)]  # type: ignore[attr-defined]


def job_spec_document(job: Job) -> dict[str, Any]:
    """The spec ``job`` was submitted with, as the mapping ``POST /api/v1/jobs/`` takes: team slug,
    image reference, and no GPU share beside whole GPUs (the YAML export and "Edit a copy")."""
    from dataclasses import asdict

    from jobs.services import spec_of

    data: dict[str, Any] = {"team": job.team.slug, "image": job.image.reference, **asdict(spec_of(job))}
    if data["gpus"]:
        data["gpu_milli"] = None
    return data


def active_images() -> QuerySet[JobImage]:
    return JobImage.objects.filter(is_active=True).order_by("name", "tag")


def job_counts() -> dict[str, Any]:
    """Cluster-wide numbers of running and waiting jobs, of preemptions and migrations so far (and how
    many jobs are being preempted now), and the rule that orders the queue. Counts only: no job of
    another team is named, so every signed-in user may see them (the queue is shared)."""
    counts = Counter(Job.objects.filter(status__in=[*RUNNING, *WAITING]).values_list("status", flat=True))
    return {
        "running": sum(counts[s.value] for s in RUNNING),
        "waiting": sum(counts[s.value] for s in WAITING),
        "preempting": counts[JobStatus.PREEMPTING.value],
        **preemption_counts(),
        "queue_order": queue_order(),
    }


@dataclass(frozen=True)
class UsageSpan:
    """One job's GPU use: ``gpu_milli`` from ``start`` to ``end`` (None = still running), and the
    GPU-hours recorded when it ended (None while running)."""

    gpu_milli: int
    start: dt.datetime
    end: dt.datetime | None
    gpu_hours: float | None


def daily_gpu_hours(
    spans: Iterable[UsageSpan], *, window_start: dt.datetime, now: dt.datetime
) -> list[tuple[dt.date, float]]:
    """GPU-hours per UTC day from ``window_start`` to ``now`` (one entry per day, zeros included).

    A running span counts ``gpu_milli / 1000`` GPUs for every hour it overlaps a day. A finished span
    spreads its recorded ``gpu_hours`` over its duration in proportion to each day's overlap, so the
    days add up to the month's total that quotas.selectors.gpu_hours_this_month reports.
    """
    first = window_start.date()
    days = [first + dt.timedelta(days=i) for i in range((now.date() - first).days + 1)]
    hours = dict.fromkeys(days, 0.0)
    for span in spans:
        end = span.end or now
        duration = (end - span.start).total_seconds() / 3600.0
        if duration <= 0:
            continue
        rate = (span.gpu_hours / duration) if span.gpu_hours is not None else span.gpu_milli / 1000.0
        for day in days:
            day_start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
            lo = max(span.start, day_start, window_start)
            hi = min(end, day_start + dt.timedelta(days=1), now)
            if hi > lo:
                hours[day] += rate * (hi - lo).total_seconds() / 3600.0
    return [(day, round(hours[day], 6)) for day in days]


def team_usage_spans(*, team: Team, since: dt.datetime) -> list[UsageSpan]:
    """The GPU use of ``team`` after ``since``, by the same rules as the quota selector
    (quotas.selectors.gpu_hours_this_month): one span per run in the run ledger, the current run of a
    running job, and for jobs without a run in the ledger one span from their first start."""
    entries = (
        UsageEntry.objects.filter(team=team)
        .filter(Q(released_at__isnull=True) | Q(released_at__gte=since))
        .select_related("job")
        .only(
            "gpu_milli", "gpu_hours", "reserved_at", "released_at", "job__started_at", "job__run_started_at"
        )
    )
    with_runs = set(RunUsage.objects.filter(team=team).values_list("job_id", flat=True).distinct())
    spans = [
        UsageSpan(gpu_milli=run.gpu_milli, start=run.started_at, end=run.ended_at, gpu_hours=run.gpu_hours)
        for run in RunUsage.objects.filter(team=team, ended_at__gte=since)
    ]
    for entry in entries:
        if entry.job_id in with_runs or entry.job.run_started_at is not None:
            if entry.released_at is None and entry.job.run_started_at is not None:
                spans.append(
                    UsageSpan(
                        gpu_milli=entry.gpu_milli, start=entry.job.run_started_at, end=None, gpu_hours=None
                    )
                )
            continue
        began = entry.job.started_at or (entry.reserved_at if entry.released_at else None)
        if began is None:
            continue
        spans.append(
            UsageSpan(
                gpu_milli=entry.gpu_milli,
                start=began,
                end=entry.released_at,
                gpu_hours=entry.gpu_hours if entry.released_at else None,
            )
        )
    return spans


@dataclass(frozen=True)
class TeamPage:
    team: Team
    role: str
    usage: QuotaUsage
    members: list[Any]
    daily_hours: list[tuple[dt.date, float]]


def team_page(*, user: Any, team_id: int) -> TeamPage | None:
    """Everything the team page shows, or None when ``user`` is not in the team (the view 404s)."""
    team = teams_for_user(user).filter(pk=team_id).first()
    if team is None:
        return None
    now = timezone.now()
    start = month_start(now)
    return TeamPage(
        team=team,
        role=team.role,  # type: ignore[attr-defined]
        usage=quota_usage(team=team, user=user),
        members=list(team_members(team=team)),
        daily_hours=daily_gpu_hours(team_usage_spans(team=team, since=start), window_start=start, now=now),
    )

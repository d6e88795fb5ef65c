"""Quota admission and release. Callers hold the transaction; rows are locked in a fixed order.

Lock order (always the same, so concurrent submissions cannot deadlock): Quota row of the team, then
the UserUsage row of (team, user). Admission checks and updates the running totals under those locks,
so N concurrent submissions can never overshoot a limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import Team
from quotas.models import Quota, UsageEntry, UserUsage


@dataclass(frozen=True)
class QuotaDenied(Exception):
    """The request exceeds a quota limit; ``field`` names the limit, ``message`` says what to do."""

    field: str
    message: str

    def __str__(self) -> str:
        return self.message


def _lock_quota(team: Team) -> Quota:
    quota, _ = Quota.objects.get_or_create(team=team)
    return Quota.objects.select_for_update().get(pk=quota.pk)


def _lock_user_usage(team: Team, user_id: int) -> UserUsage:
    usage, _ = UserUsage.objects.get_or_create(team=team, user_id=user_id)
    return UserUsage.objects.select_for_update().get(pk=usage.pk)


def month_gpu_hours(team: Team) -> float:
    start = timezone.now().replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    total = 0.0
    for entry in UsageEntry.objects.filter(team=team).exclude(released_at__lt=start):
        total += entry.gpu_hours if entry.released_at else _hours_so_far(entry)
    return total


def _hours_so_far(entry: UsageEntry) -> float:
    return entry.gpu_milli / 1000.0 * (timezone.now() - entry.reserved_at).total_seconds() / 3600.0


@transaction.atomic
def quota_reserve(*, job: object, team: Team, user_id: int, gpu_milli: int) -> UsageEntry:
    """Reserve ``gpu_milli`` for ``job`` against the team's quota, or raise :class:`QuotaDenied`."""
    quota = _lock_quota(team)
    usage = _lock_user_usage(team, user_id)
    if quota.used_jobs + 1 > quota.max_concurrent_jobs:
        raise QuotaDenied(
            "max_concurrent_jobs",
            f"team {team.name} already has {quota.used_jobs} of {quota.max_concurrent_jobs} concurrent jobs",
        )
    if quota.used_gpu_milli + gpu_milli > quota.max_gpu_milli:
        free = quota.max_gpu_milli - quota.used_gpu_milli
        raise QuotaDenied(
            "gpus",
            f"team {team.name} has {free / 1000:g} GPU(s) of quota left; this job needs {gpu_milli / 1000:g}",
        )
    if usage.used_gpu_milli + gpu_milli > quota.per_user_gpu_milli:
        raise QuotaDenied(
            "gpus",
            f"your per-user cap in team {team.name} is {quota.per_user_gpu_milli / 1000:g} GPU(s); "
            f"you hold {usage.used_gpu_milli / 1000:g}",
        )
    if gpu_milli and month_gpu_hours(team) >= quota.gpu_hours_per_month:
        raise QuotaDenied(
            "gpu_hours_per_month",
            f"team {team.name} has used its {quota.gpu_hours_per_month:g} GPU-hours for this month",
        )
    Quota.objects.filter(pk=quota.pk).update(
        used_gpu_milli=F("used_gpu_milli") + gpu_milli,
        used_jobs=F("used_jobs") + 1,
        updated_at=timezone.now(),
    )
    UserUsage.objects.filter(pk=usage.pk).update(used_gpu_milli=F("used_gpu_milli") + gpu_milli)
    return UsageEntry.objects.create(team=team, user_id=user_id, job=job, gpu_milli=gpu_milli)


@transaction.atomic
def quota_release(*, job_id: int, gpu_hours: float | None = None) -> bool:
    """Give back what ``job_id`` reserved. Idempotent: returns False if already released."""
    entry = UsageEntry.objects.select_related("team").filter(job_id=job_id).first()
    if entry is None or entry.released_at is not None:
        return False
    quota = _lock_quota(entry.team)
    usage = _lock_user_usage(entry.team, entry.user_id)
    entry = UsageEntry.objects.select_for_update().get(pk=entry.pk)
    if entry.released_at is not None:
        return False
    entry.released_at = timezone.now()
    entry.gpu_hours = gpu_hours if gpu_hours is not None else _hours_so_far(entry)
    entry.save(update_fields=["released_at", "gpu_hours"])
    Quota.objects.filter(pk=quota.pk).update(
        used_gpu_milli=F("used_gpu_milli") - entry.gpu_milli,
        used_jobs=F("used_jobs") - 1,
        updated_at=timezone.now(),
    )
    UserUsage.objects.filter(pk=usage.pk).update(used_gpu_milli=F("used_gpu_milli") - entry.gpu_milli)
    return True

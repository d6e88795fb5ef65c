"""Quota admission and release. Callers hold the transaction; rows are locked in a fixed order.

Lock order (always the same, so concurrent submissions cannot deadlock): Quota row of the team, then
the UserUsage row of (team, user). Admission checks and updates the running totals under those locks,
so N concurrent submissions can never overshoot a limit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import Team
from quotas.models import Quota, RunUsage, UsageEntry, UserUsage

audit = logging.getLogger("audit")


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
    """GPU-hours ``team`` used since the start of this month (UTC). See quotas.selectors."""
    from quotas.selectors import gpu_hours_this_month

    return gpu_hours_this_month(team=team)


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


def las_gpus(*, gpus: int, gpu_milli: int, replicas: int) -> int:
    """GPUs a job holds as 2D-LAS counts attained service: whole GPUs, or one per shared replica."""
    return replicas * (gpus if gpus else (1 if gpu_milli else 0))


def usage_record_run(*, job: Any, started_at: datetime, ended_at: datetime, ended_as: str) -> RunUsage:
    """Add one finished run of ``job`` to the ledger; returns the row (its ``gpu_seconds`` is the run's
    attained service). The caller holds the job's row lock (jobs.services.job_transition)."""
    gpus = las_gpus(gpus=job.gpus, gpu_milli=job.gpu_milli, replicas=job.replicas)
    seconds = max(0.0, (ended_at - started_at).total_seconds())
    return RunUsage.objects.create(
        team_id=job.team_id,
        job=job,
        started_at=started_at,
        ended_at=max(started_at, ended_at),
        gpus=gpus,
        gpu_milli=job.total_gpu_milli,
        gpu_seconds=gpus * seconds,
        ended_as=ended_as,
    )


def quota_ensure(*, team: Team) -> Quota:
    """The team's quota row, created with the model defaults if it does not exist yet."""
    quota, _ = Quota.objects.get_or_create(team=team)
    return quota


# Limits an administrator may set, and the largest value each accepts.
QUOTA_LIMITS: dict[str, float] = {
    "guaranteed_gpu_milli": 10_000_000,
    "max_gpu_milli": 10_000_000,
    "max_concurrent_jobs": 1_000_000,
    "gpu_hours_per_month": 100_000_000.0,
    "per_user_gpu_milli": 10_000_000,
}


def quota_limit_errors(*, quota: Quota, limits: dict[str, Any]) -> dict[str, list[str]]:
    """Field messages for ``limits`` applied to ``quota`` (empty when valid). Pure: changes nothing."""
    errors: dict[str, list[str]] = {}
    for name, value in limits.items():
        if name not in QUOTA_LIMITS:
            errors[name] = ["Unknown quota limit."]
            continue
        is_float = isinstance(QUOTA_LIMITS[name], float)
        valid_type = isinstance(value, int | float) if is_float else isinstance(value, int)
        if isinstance(value, bool) or not valid_type:
            errors[name] = ["A number is required." if is_float else "An integer is required."]
        elif not 0 <= value <= QUOTA_LIMITS[name]:
            errors[name] = [f"Must be between 0 and {QUOTA_LIMITS[name]:g}."]
    if not errors:
        guaranteed = limits.get("guaranteed_gpu_milli", quota.guaranteed_gpu_milli)
        maximum = limits.get("max_gpu_milli", quota.max_gpu_milli)
        if guaranteed > maximum:
            errors["guaranteed_gpu_milli"] = ["The guarantee cannot exceed the maximum (max_gpu_milli)."]
    return errors


@transaction.atomic
def quota_set(*, team: Team, actor: Any, **limits: Any) -> Quota:
    """Set some of the team's limits (names in :data:`QUOTA_LIMITS`); the others keep their values.

    Raises ValidationError with field messages (see :func:`quota_limit_errors`) for unknown names,
    negative or non-numeric values, or a guarantee above the maximum. Lowering a limit below current
    usage is allowed: running jobs keep running, new submissions are refused until usage falls. The
    running totals are never set here.
    """
    quota = _lock_quota(team)
    errors = quota_limit_errors(quota=quota, limits=limits)
    if errors:
        raise ValidationError(errors)
    for name, value in limits.items():
        setattr(quota, name, value)
    quota.updated_at = timezone.now()
    quota.save(update_fields=[*limits, "updated_at"])
    audit.info("quota set: %s %s by %s", team.slug, limits, getattr(actor, "username", actor))
    return quota

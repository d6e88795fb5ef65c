"""Quota admission and release, budgets and their grants. Callers hold the transaction; rows are
locked in a fixed order.

Quota is taken at admission (the scheduling cycle moving a job QUEUED -> ADMITTED), not at submit,
and given back when the job ends or is preempted. Lock order (always the same, so concurrent cycles,
cancels and syncs cannot deadlock): the Job row, then the Quota row of its team, then the UserUsage
row of (team, user). Admission checks and updates the running totals under those locks, so
concurrent admissions can never overshoot a limit. Each time a team's usage or guarantee changes, its
open ledger entries are marked borrowed again under its Quota row (:func:`_remark`): the team's
excess over its guarantee, on its newest admissions (``scheduler.policy.cohort.borrowed_marks``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone

from accounts.models import Team
from quotas.models import BudgetGrant, Quota, QuotaEvent, RunUsage, UsageEntry, UserUsage
from scheduler.policy.cohort import TeamQuota, admission_problem, borrowed_marks

audit = logging.getLogger("audit")

BUDGET_WARNING_FRACTION = 0.8
MAX_GRANT_GPU_HOURS = 1_000_000.0


@dataclass(frozen=True)
class QuotaDenied(Exception):
    """Admitting the job now would exceed a quota limit; ``field`` names the limit, ``message`` is the
    waiting reason ("waiting for quota: team X uses 8 of 8 GPUs"). The job waits; it is not refused."""

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


def month_key(now: datetime | None = None) -> str:
    """The budget month of ``now`` (UTC), as "YYYY-MM"."""
    return (now or timezone.now()).strftime("%Y-%m")


def month_gpu_hours(team: Team) -> float:
    """GPU-hours ``team`` used since the start of this month (UTC). See quotas.selectors."""
    from quotas.selectors import gpu_hours_this_month

    return gpu_hours_this_month(team=team)


def budget_gpu_hours(*, quota: Quota, month: str | None = None) -> float:
    """The team's GPU-hour budget of ``month`` (default: this one): the monthly budget plus the hours
    an admin granted for that month."""
    granted = BudgetGrant.objects.filter(team_id=quota.team_id, month=month or month_key()).aggregate(
        total=Sum("gpu_hours")
    )["total"]
    return float(quota.gpu_hours_per_month) + float(granted or 0.0)


def _hours_so_far(entry: UsageEntry) -> float:
    return entry.gpu_milli / 1000.0 * (timezone.now() - entry.reserved_at).total_seconds() / 3600.0


_FIELDS = {
    "concurrent jobs": "max_concurrent_jobs",
    "per-user cap": "per_user_gpu_milli",
    "budget": "gpu_hours_per_month",
}


def _denied_field(message: str) -> str:
    return next((f for words, f in _FIELDS.items() if words in message), "max_gpu_milli")


def team_quota(*, quota: Quota, team: Team, user_used: dict[str, int], budget_used: float) -> TeamQuota:
    """The policy's view (scheduler.policy.cohort.TeamQuota) of one team's quota row."""
    return TeamQuota(
        team=team.slug,
        name=team.name,
        guaranteed_milli=quota.guaranteed_gpu_milli,
        max_milli=quota.max_gpu_milli,
        used_milli=quota.used_gpu_milli,
        max_jobs=quota.max_concurrent_jobs,
        used_jobs=quota.used_jobs,
        per_user_milli=quota.per_user_gpu_milli,
        user_used_milli=user_used,
        budget_gpu_h=budget_gpu_hours(quota=quota),
        budget_used_gpu_h=budget_used,
        lending_limit_milli=quota.lending_limit_gpu_milli,
    )


def _remark(*, team_id: int, used: int, guaranteed: int) -> None:
    """Mark the team's open entries borrowed again after its usage (``used``, as it is now) or its
    guarantee changed: its excess on its newest admissions (``borrowed_marks``). The caller holds the
    team's Quota row: a team's entries are created and marked one transaction at a time, so their ids
    are in admission order (``reserved_at`` is the web or worker clock). Only changed rows are
    written, by one statement. Two cases need no read: no excess (every mark is 0) and no guarantee
    (the excess is all the team holds, ``used`` being the sum of its open entries: every entry is
    marked in full)."""
    open_entries = UsageEntry.objects.filter(team_id=team_id, released_at__isnull=True)
    excess = max(0, used - guaranteed)
    if excess == 0:
        open_entries.filter(borrowed_gpu_milli__gt=0).update(borrowed_gpu_milli=0)
        return
    if guaranteed <= 0:
        open_entries.exclude(borrowed_gpu_milli=F("gpu_milli")).update(borrowed_gpu_milli=F("gpu_milli"))
        return
    rows = list(open_entries.order_by("-pk").values_list("pk", "gpu_milli", "borrowed_gpu_milli"))
    marks = borrowed_marks([milli for _pk, milli, _old in rows], excess)
    changed = [
        UsageEntry(pk=pk, borrowed_gpu_milli=mark)
        for (pk, _milli, old), mark in zip(rows, marks, strict=True)
        if mark != old
    ]
    if changed:
        UsageEntry.objects.bulk_update(changed, ["borrowed_gpu_milli"])


@transaction.atomic
def quota_reserve(*, job: Any, team: Team, user_id: int, gpu_milli: int) -> UsageEntry:
    """Reserve ``gpu_milli`` for ``job`` against the team's quota (admission), or raise
    :class:`QuotaDenied` with the waiting reason. The limits are those of
    ``scheduler.policy.cohort.admission_problem``: maximum, per-user cap, concurrent jobs, monthly
    budget. The team's entries are then marked borrowed again (:func:`_remark`). The caller locks the
    job's row first (lock order: Job, Quota, UserUsage), so admission, cancels and releases never
    deadlock."""
    quota = _lock_quota(team)
    usage = _lock_user_usage(team, user_id)
    user = getattr(job, "user", None)
    username = user.get_username() if user is not None else str(user_id)
    state = team_quota(
        quota=quota,
        team=team,
        user_used={username: usage.used_gpu_milli},
        budget_used=month_gpu_hours(team) if gpu_milli else 0.0,
    )
    problem = admission_problem(state, username, gpu_milli)
    if problem is not None:
        raise QuotaDenied(_denied_field(problem), problem)
    Quota.objects.filter(pk=quota.pk).update(
        used_gpu_milli=F("used_gpu_milli") + gpu_milli,
        used_jobs=F("used_jobs") + 1,
        updated_at=timezone.now(),
    )
    UserUsage.objects.filter(pk=usage.pk).update(used_gpu_milli=F("used_gpu_milli") + gpu_milli)
    used = quota.used_gpu_milli + gpu_milli
    # The newest entry takes the excess first (borrowed_marks' rule): created with its mark, so the
    # returned entry is right and _remark then only moves the older ones.
    mark = borrowed_marks([gpu_milli], used - quota.guaranteed_gpu_milli)[0]
    entry = UsageEntry.objects.create(
        team=team, user_id=user_id, job=job, gpu_milli=gpu_milli, borrowed_gpu_milli=mark
    )
    _remark(team_id=team.pk, used=used, guaranteed=quota.guaranteed_gpu_milli)
    if gpu_milli:
        budget_warn_if_due(team=team, quota=quota, used=state.budget_used_gpu_h)
    return entry


def budget_warn_if_due(*, team: Team, quota: Quota, used: float | None = None) -> QuotaEvent | None:
    """Write the month's budget warning once the team has used 80 % of its budget (once a month)."""
    month = month_key()
    if quota.budget_warned_month == month:
        return None
    budget = budget_gpu_hours(quota=quota, month=month)
    used = month_gpu_hours(team) if used is None else used
    if budget <= 0 or used < BUDGET_WARNING_FRACTION * budget:
        return None
    if (
        not Quota.objects.filter(pk=quota.pk)
        .exclude(budget_warned_month=month)
        .update(budget_warned_month=month)
    ):
        return None  # another admission wrote it first
    message = (
        f"team {team.name} has used {used:.1f} of its {budget:g} GPU-h budget this month "
        f"({used / budget:.0%}); jobs wait once it is used up"
    )
    audit.info("budget warning: %s %s", team.slug, message)
    return QuotaEvent.objects.create(
        team=team, kind=QuotaEvent.Kind.BUDGET_WARNING, message=message, actor="system"
    )


def _entry_gpu_hours(entry: UsageEntry, given: float | None) -> float:
    """GPU-hours of one admission: the runs of the ledger that ended after it reserved (a job admitted again
    after a preemption has one entry per admission); ``given`` (else the time since the reservation)
    for a job whose runs predate the run ledger."""
    runs = RunUsage.objects.filter(job_id=entry.job_id)
    if runs.exists():
        return sum(run.gpu_hours for run in runs.filter(ended_at__gte=entry.reserved_at))
    return given if given is not None else _hours_so_far(entry)


@transaction.atomic
def quota_release(*, job_id: int, gpu_hours: float | None = None) -> bool:
    """Give back what ``job_id``'s current admission reserved (at its end, or when it is preempted or
    requeued). Idempotent: returns False if nothing is held."""
    entry = UsageEntry.objects.select_related("team").filter(job_id=job_id, released_at__isnull=True).first()
    if entry is None:
        return False
    quota = _lock_quota(entry.team)
    usage = _lock_user_usage(entry.team, entry.user_id)
    entry = UsageEntry.objects.select_for_update().get(pk=entry.pk)
    if entry.released_at is not None:
        return False
    entry.released_at = timezone.now()
    entry.gpu_hours = _entry_gpu_hours(entry, gpu_hours)
    entry.save(update_fields=["released_at", "gpu_hours"])
    Quota.objects.filter(pk=quota.pk).update(
        used_gpu_milli=F("used_gpu_milli") - entry.gpu_milli,
        used_jobs=F("used_jobs") - 1,
        updated_at=timezone.now(),
    )
    UserUsage.objects.filter(pk=usage.pk).update(used_gpu_milli=F("used_gpu_milli") - entry.gpu_milli)
    used = quota.used_gpu_milli - entry.gpu_milli
    _remark(team_id=quota.team_id, used=used, guaranteed=quota.guaranteed_gpu_milli)
    return True


@transaction.atomic
def budget_grant(
    *, team: Team, gpu_hours: float, actor: Any, reason: str = "", month: str | None = None
) -> BudgetGrant:
    """Grant ``team`` extra GPU-hours for ``month`` (default: this one); audited (a QuotaEvent and the
    audit log). Jobs waiting for the budget are admitted by the next cycle. ValidationError for a
    non-positive or absurd amount."""
    if (
        isinstance(gpu_hours, bool)
        or not isinstance(gpu_hours, int | float)
        or not 0 < gpu_hours <= MAX_GRANT_GPU_HOURS
    ):
        raise ValidationError(
            {"gpu_hours": [f"Must be a number above 0 and at most {MAX_GRANT_GPU_HOURS:g}."]}
        )
    quota = _lock_quota(team)
    month = month or month_key()
    grant = BudgetGrant.objects.create(
        team=team, month=month, gpu_hours=float(gpu_hours), granted_by=actor, reason=reason[:500]
    )
    who = getattr(actor, "username", str(actor))
    message = f"{gpu_hours:g} extra GPU-h for {month} granted by {who}" + (f": {reason}" if reason else "")
    QuotaEvent.objects.create(team=team, kind=QuotaEvent.Kind.BUDGET_GRANT, message=message[:1000], actor=who)
    # A new grant can push the team back under 80 %: the warning may be written again this month.
    if quota.budget_warned_month == month:
        Quota.objects.filter(pk=quota.pk).update(budget_warned_month="")
    audit.info("budget grant: %s %s", team.slug, message)
    return grant


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
    # None (null): others may borrow all of the team's unused guarantee.
    "lending_limit_gpu_milli": 10_000_000,
}
# Limits that may be set to None.
NULLABLE_LIMITS = frozenset({"lending_limit_gpu_milli"})


def quota_limit_errors(*, quota: Quota, limits: dict[str, Any]) -> dict[str, list[str]]:
    """Field messages for ``limits`` applied to ``quota`` (empty when valid). Pure: changes nothing."""
    errors: dict[str, list[str]] = {}
    for name, value in limits.items():
        if name not in QUOTA_LIMITS:
            errors[name] = ["Unknown quota limit."]
            continue
        if value is None and name in NULLABLE_LIMITS:
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
    usage is allowed: running jobs keep running, new jobs wait until usage falls. The running totals
    are never set here; a new guarantee marks the team's entries borrowed again (:func:`_remark`).
    Audited: a QuotaEvent and the audit log.
    """
    quota = _lock_quota(team)
    errors = quota_limit_errors(quota=quota, limits=limits)
    if errors:
        raise ValidationError(errors)
    for name, value in limits.items():
        setattr(quota, name, value)
    quota.updated_at = timezone.now()
    quota.save(update_fields=[*limits, "updated_at"])
    if "guaranteed_gpu_milli" in limits:
        _remark(team_id=team.pk, used=quota.used_gpu_milli, guaranteed=quota.guaranteed_gpu_milli)
    who = getattr(actor, "username", str(actor))
    shown = ", ".join(f"{name}={value}" for name, value in sorted(limits.items()))
    QuotaEvent.objects.create(
        team=team, kind=QuotaEvent.Kind.LIMITS_SET, message=f"limits set by {who}: {shown}"[:1000], actor=who
    )
    audit.info("quota set: %s %s by %s", team.slug, limits, who)
    return quota


@transaction.atomic
def quota_set_urgent_users(*, team: Team, users: Any, actor: Any) -> Quota:
    """Set who may submit ``urgent`` jobs in ``team`` (audited)."""
    quota = _lock_quota(team)
    chosen = list(users)
    quota.urgent_users.set(chosen)
    who = getattr(actor, "username", str(actor))
    names = ", ".join(sorted(u.get_username() for u in chosen)) or "nobody"
    QuotaEvent.objects.create(
        team=team,
        kind=QuotaEvent.Kind.LIMITS_SET,
        message=f"urgent users set by {who}: {names}"[:1000],
        actor=who,
    )
    audit.info("urgent users: %s %s by %s", team.slug, names, who)
    return quota

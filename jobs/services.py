"""Writes to jobs. Keyword-only, typed, atomic; every status change goes through job_transition()."""

from __future__ import annotations

import copy
import logging
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.models import Role, Team
from images.compat import driver_incompatibility
from images.models import JobImage
from jobs import cluster, dispatch
from jobs.models import Job, JobEvent
from jobs.selectors import resolve_image
from jobs.specs import JobSpec, gpu_milli_per_replica, validate_job_spec
from jobs.states import HOLDS_QUOTA, RUNS, JobStatus, is_legal
from quotas.selectors import run_gpu_hours
from quotas.services import quota_release, quota_reserve, usage_record_run

logger = logging.getLogger(__name__)
audit = logging.getLogger("audit")


class IllegalTransition(Exception):
    def __init__(self, job_id: int, source: str, target: str) -> None:
        super().__init__(f"job {job_id}: {source} -> {target} is not a legal transition")
        self.source = source
        self.target = target


def _gpu_hours_used(job: Job) -> float:
    """GPU-hours a job consumed: its GPU share times the time its runs ran (queue time, also between
    runs of a preempted or retried job, uses no GPU). Jobs without run rows in the ledger (they ran
    before it existed) count from their first start to their end."""
    from_runs = run_gpu_hours(job_id=job.pk)
    if from_runs is not None:
        return from_runs
    if job.started_at is None:
        return 0.0
    end = job.finished_at or timezone.now()
    return job.total_gpu_milli / 1000.0 * max(0.0, (end - job.started_at).total_seconds()) / 3600.0


@transaction.atomic
def job_transition(
    *,
    job: Job,
    to: JobStatus,
    actor: str,
    reason: str = "",
    expected_from: JobStatus | None = None,
    failure_category: str = "",
) -> bool:
    """Move ``job`` to ``to`` if the edge is legal, recording a JobEvent.

    The row is re-read under a lock, so concurrent callers see each other's changes. With
    ``expected_from`` this is a compare-and-set: it returns False (and changes nothing) when the job is
    no longer in that state, which makes Celery tasks safe to repeat. An illegal edge raises
    :class:`IllegalTransition`. When the job enters the quota-holding states (admission) its quota is
    reserved, or :class:`quotas.services.QuotaDenied` is raised and nothing changes; when it leaves
    them its quota is released.
    """
    locked = Job.objects.select_for_update().get(pk=job.pk)
    source = JobStatus(locked.status)
    if expected_from is not None and source is not expected_from:
        job.refresh_from_db()
        return False
    if not is_legal(source, to):
        raise IllegalTransition(locked.pk, source.value, to.value)
    if to in HOLDS_QUOTA and source not in HOLDS_QUOTA:
        # Admission takes the quota here, under the job's row lock (then the quota rows: the fixed
        # lock order of quotas.services); QuotaDenied leaves the job where it was.
        quota_reserve(job=locked, team=locked.team, user_id=locked.user_id, gpu_milli=locked.total_gpu_milli)
    fields = _apply_transition(locked, source, to, reason, failure_category, timezone.now())
    locked.save(update_fields=fields)
    JobEvent.objects.create(
        job=locked, from_status=source.value, to_status=to.value, actor=actor, reason=reason
    )
    if source in HOLDS_QUOTA and to not in HOLDS_QUOTA:
        quota_release(job_id=locked.pk, gpu_hours=_gpu_hours_used(locked))
    job.refresh_from_db()
    return True


@transaction.atomic
def job_transition_many(
    *, reasons: dict[int, str], to: JobStatus, expected_from: JobStatus, actor: str
) -> list[int]:
    """The same edge ``expected_from -> to`` for many jobs in one transaction; returns the ids moved.

    Each job is moved exactly as :func:`job_transition` would move it (same fields, run ledger, quota
    release, one JobEvent with its own reason from ``reasons``), but the rows are locked by one query
    and written by one bulk update, and the events by one bulk insert: the status sync moves dozens
    of jobs per pass under a burst, and a locked read-modify-write each made it fall behind. Jobs no
    longer in ``expected_from`` are skipped (compare-and-set), so a racing cancel or sync wins.
    """
    if not reasons:
        return []
    if not is_legal(expected_from, to):
        raise IllegalTransition(next(iter(reasons)), expected_from.value, to.value)
    if to in HOLDS_QUOTA and expected_from not in HOLDS_QUOTA:
        # Admission may be refused per job (QuotaDenied): one job at a time, through job_transition.
        raise ValueError(f"{expected_from.value} -> {to.value} reserves quota: use job_transition")
    # Locks in primary-key order, as every other multi-row lock: two passes cannot deadlock.
    locked = list(
        Job.objects.select_for_update()
        .filter(pk__in=list(reasons), status=expected_from.value)
        .order_by("pk")
    )
    if not locked:
        return []
    now = timezone.now()
    fields: set[str] = set()
    for job in locked:
        fields.update(_apply_transition(job, expected_from, to, reasons[job.pk], "", now))
    Job.objects.bulk_update(locked, sorted(fields))
    JobEvent.objects.bulk_create(
        [
            JobEvent(
                job=job,
                created_at=now,
                from_status=expected_from.value,
                to_status=to.value,
                actor=actor,
                reason=reasons[job.pk],
            )
            for job in locked
        ]
    )
    if expected_from in HOLDS_QUOTA and to not in HOLDS_QUOTA:
        for job in locked:
            quota_release(job_id=job.pk, gpu_hours=_gpu_hours_used(job))
    return [job.pk for job in locked]


def _apply_transition(
    locked: Job, source: JobStatus, to: JobStatus, reason: str, failure_category: str, now: Any
) -> list[str]:
    """Set the fields of one transition on the locked ``job`` (not saved); returns their names."""
    locked.status = to.value
    locked.updated_at = now
    fields = ["status", "updated_at"]
    if to is JobStatus.SUBMITTED:
        locked.submitted_at = now
        fields.append("submitted_at")
    if to is JobStatus.RUNNING and locked.started_at is None:
        locked.started_at = now
        fields.append("started_at")
    fields += _account_runs(locked, source, to, now)
    if to in (JobStatus.QUEUED, JobStatus.REQUEUED):
        locked.pending_reason = reason
        fields.append("pending_reason")
    elif to is not JobStatus.QUEUED and locked.pending_reason:
        locked.pending_reason = ""
        fields.append("pending_reason")
    if to is not JobStatus.QUEUED and locked.queue_position is not None:
        locked.queue_position = None
        fields.append("queue_position")
    if to is JobStatus.FAILED:
        locked.failure_category = failure_category or "PLATFORM"
        locked.failure_message = reason
        fields += ["failure_category", "failure_message"]
    if to.is_terminal:
        locked.finished_at = now
        fields.append("finished_at")
    return fields


def _account_runs(job: Job, source: JobStatus, to: JobStatus, now: Any) -> list[str]:
    """Run bookkeeping of one transition of the locked ``job``; returns the fields it changed.

    A run starts when the job becomes RUNNING and ends when it leaves the states whose processes hold
    GPUs (RUNNING, PREEMPTING, STOPPING): the run goes to the ledger (quotas.RunUsage) and its GPU-
    seconds to ``attained_gpu_seconds``. Time lost to a preemption is what the platform can measure:
    the grace period actually waited (PREEMPTING until the tasks stopped) plus the restart of the next
    run (its ADMITTED until RUNNING); work since the job's last checkpoint is unknowable here.
    """
    changed: list[str] = []
    if to is JobStatus.RUNNING and source not in RUNS:
        if job.preempted_at is not None:
            admitted = (
                JobEvent.objects.filter(job=job, to_status=JobStatus.ADMITTED.value)
                .order_by("-created_at", "-id")
                .values_list("created_at", flat=True)
                .first()
            )
            if admitted is not None and admitted >= job.preempted_at:
                job.time_lost_seconds += max(0.0, (now - admitted).total_seconds())
                changed.append("time_lost_seconds")
            job.preempted_at = None
            job.preempted_for = None
            changed += ["preempted_at", "preempted_for"]
        job.run_started_at = now
        changed.append("run_started_at")
    if to is JobStatus.PREEMPTING:
        job.preempted_at = now
        changed.append("preempted_at")
    if source is JobStatus.PREEMPTING and job.preempted_at is not None:
        job.time_lost_seconds += max(0.0, (now - job.preempted_at).total_seconds())
        changed.append("time_lost_seconds")
        if to is not JobStatus.REQUEUED:  # it ended (or was cancelled): no restart will follow
            job.preempted_at = None
            changed.append("preempted_at")
    if source in RUNS and to not in RUNS and job.run_started_at is not None:
        run = usage_record_run(job=job, started_at=job.run_started_at, ended_at=now, ended_as=to.value)
        job.attained_gpu_seconds += run.gpu_seconds
        job.run_started_at = None
        changed += ["attained_gpu_seconds", "run_started_at"]
    return changed


# --- submission, cancel, clone -------------------------------------------------------------------

QUEUED_REASON = "Waiting for the next scheduling cycle."
# Cancelling these needs nothing from the cluster: no task was ever bound.
STOP_DIRECTLY = frozenset({JobStatus.DRAFT, JobStatus.SUBMITTED, JobStatus.QUEUED, JobStatus.REQUEUED})
# Cancelling these must delete tasks on the backend first (STOPPING, then the stop task ends it).
STOP_VIA_BACKEND = frozenset(
    {JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING, JobStatus.PREEMPTING}
)


class JobConflict(Exception):
    """The job's current state does not allow the request (HTTP 409)."""


def resolve_team(*, user: Any, team: Team | int | str | None) -> Team:
    """The team a submission goes to. Unknown teams and teams the user is not in look the same (400);
    a team where the user is only a viewer is a permission error (403)."""
    from accounts.selectors import can_write, role_of, teams_with_role

    if isinstance(team, Team):
        role = role_of(user=user, team=team)
        if role is None:
            raise ValidationError({"team": ["No team with this id or slug among your teams."]})
        found = team
    else:
        mine = teams_with_role(user)
        if team is None:
            writable = [t for t in mine if can_write(t.role)]  # type: ignore[attr-defined]
            if len(writable) == 1:
                return writable[0]
            if not writable and mine:
                raise PermissionDenied("You are a viewer in all your teams; viewers cannot submit jobs.")
            message = "Name the team to submit to." if writable else "You are not a member of any team."
            raise ValidationError({"team": [message]})
        found_or_none = next((t for t in mine if _names_team(team, t)), None)
        if found_or_none is None:
            raise ValidationError({"team": ["No team with this id or slug among your teams."]})
        found = found_or_none
        role = found.role  # type: ignore[attr-defined]
    if not can_write(role):
        raise PermissionDenied(f"Viewers of team {found.name} cannot submit jobs.")
    return found


def _names_team(ref: object, team: Team) -> bool:
    """Whether a submission's ``team`` field (an id, a numeric string or a slug) names ``team``."""
    if isinstance(ref, bool):
        return False
    if isinstance(ref, int):
        return ref == team.pk
    if isinstance(ref, str):
        ref = ref.strip()
        return int(ref) == team.pk if ref.isdigit() else ref == team.slug
    return False


def cluster_problems(*, spec: JobSpec, image: JobImage, team: Team, user: Any) -> dict[str, list[str]]:
    """Why a well-formed ``spec`` could never run here, as field messages (empty: it can): the image's
    minimum driver on the GPU nodes, and what :func:`_never_runnable` refuses. Reads the cluster's
    node shapes (jobs.cluster.cluster_capacity: kept per process until the node list changes)."""
    nodes = _cluster_nodes()
    from workspaces.limits import workspace_limit_problems

    if limits := workspace_limit_problems(spec=spec, team=team):
        return limits
    if problem := _driver_problem(image, spec, nodes):
        return {"image": [problem]}
    return _never_runnable(spec=spec, team=team, user=user, nodes=nodes)


def _cluster_nodes() -> tuple[cluster.NodeCapacity, ...] | None:
    """The cluster's node shapes, or None when the backend cannot be asked (module missing, backend
    unreachable): the checks that need them are then skipped and the scheduler's filters decide later."""
    try:
        return cluster.cluster_capacity().nodes
    except Exception:  # noqa: BLE001  (an optional check must never make a submission fail)
        logger.warning("cluster checks at submit skipped", exc_info=True)
        return None


def _driver_problem(
    image: JobImage, spec: JobSpec, nodes: tuple[cluster.NodeCapacity, ...] | None
) -> str | None:
    """Why no GPU node can run ``image`` (its minimum driver), or None (also when unknown)."""
    if not image.min_driver or gpu_milli_per_replica(spec) == 0 or nodes is None:
        return None
    drivers = [
        node.driver_version
        for node in nodes
        if node.gpu_count and (not spec.gpu_models or node.gpu_model in spec.gpu_models)
    ]
    if not drivers:
        return None
    return driver_incompatibility(image.min_driver, drivers, image=image.reference)


def _never_runnable(
    *, spec: JobSpec, team: Team, user: Any, nodes: tuple[cluster.NodeCapacity, ...] | None
) -> dict[str, list[str]]:
    """Why ``spec`` could never run in ``team`` on this cluster, as field messages (empty: it can).

    Only what no wait can change: more GPUs than the team's maximum or the per-user cap, a team that
    may run no job, and per task more GPUs, CPU or memory than any node has, a GPU model no node has,
    or more memory per GPU than any GPU has. Over the quota's *current* free share is not here: such a
    job waits in the queue with the reason. ``urgent`` only for users an admin allowed."""
    from quotas.services import quota_ensure
    from scheduler.policy.priority_class import is_urgent

    errors: dict[str, list[str]] = {}
    quota = quota_ensure(team=team)
    total = gpu_milli_per_replica(spec) * spec.replicas
    if total > quota.max_gpu_milli:
        errors["gpus"] = [
            f"This job asks for {total / 1000:g} GPU(s); team {team.name}'s maximum is "
            f"{quota.max_gpu_milli / 1000:g}, so it could never run."
        ]
    elif total > quota.per_user_gpu_milli:
        errors["gpus"] = [
            f"This job asks for {total / 1000:g} GPU(s); the per-user cap of team {team.name} is "
            f"{quota.per_user_gpu_milli / 1000:g}, so it could never run."
        ]
    if quota.max_concurrent_jobs == 0:
        errors["team"] = [f"Team {team.name} may run no jobs (its maximum of concurrent jobs is 0)."]
    if (
        is_urgent(spec.priority)
        and not user.is_superuser
        and not quota.urgent_users.filter(pk=user.pk).exists()
    ):
        errors["priority"] = [f"Only users an admin allowed may submit urgent jobs in team {team.name}."]
    ready = [n for n in nodes or [] if n.schedulable]
    if not ready:
        return errors
    gpu_nodes = [n for n in ready if n.gpu_count]
    if spec.gpu_models:
        models = {model for n in gpu_nodes for model in n.gpu_models}
        if not models & set(spec.gpu_models):
            errors["gpu_models"] = [
                f"No node has a GPU of model {', '.join(spec.gpu_models)}; the cluster has "
                f"{', '.join(sorted(models)) or 'no GPUs'}."
            ]
            return errors
        gpu_nodes = [n for n in gpu_nodes if n.gpu_models & set(spec.gpu_models)]
    if spec.gpus:
        most = max((n.gpu_count for n in gpu_nodes), default=0)
        if spec.gpus > most:
            errors.setdefault("gpus", []).append(
                f"No node has {spec.gpus} GPUs for one task (the most on a node is {most}); "
                "ask for fewer GPUs per task and more replicas."
            )
    elif spec.gpu_milli and not gpu_nodes:
        errors.setdefault("gpu_milli", []).append("No node has a GPU to share.")
    if spec.gpu_memory_mib and (spec.gpus or spec.gpu_milli):
        largest = max((n.gpu_memory_mib for n in gpu_nodes), default=0)
        if largest and spec.gpu_memory_mib > largest:
            errors["gpu_memory_mib"] = [
                f"No GPU has {spec.gpu_memory_mib} MiB of memory (the largest has {largest} MiB)."
            ]
    if spec.cpu_milli > max(n.cpu_milli for n in ready):
        errors["cpu_milli"] = [f"No node has {spec.cpu_milli} milli-CPU for one task."]
    if spec.memory_mib > max(n.memory_mib for n in ready):
        errors["memory_mib"] = [f"No node has {spec.memory_mib} MiB of memory for one task."]
    return errors


def job_submit(
    *,
    user: Any,
    spec: JobSpec,
    image: JobImage | int | str,
    team: Team | int | str | None = None,
    reason: str = "",
) -> Job:
    """Validate ``spec`` and queue it. Returns the QUEUED job.

    Raises ValidationError (field messages: bad spec, unknown team or image, inactive or incompatible
    image, a request that could never run: see :func:`_never_runnable`) or PermissionDenied (the user
    is a viewer of the team). In every one of those cases nothing is stored. The job goes DRAFT ->
    SUBMITTED -> QUEUED in one transaction and holds no quota yet: the scheduling cycle reserves it
    when it admits the job (quotas.services.quota_reserve); over the team's free quota the job waits
    with the reason. A scheduling cycle is requested once it commits.
    """
    errors = validate_job_spec(spec)
    chosen_team = resolve_team(user=user, team=team)
    chosen_image = resolve_image(image)
    if chosen_image is None:
        errors["image"] = ["Unknown image; see GET /api/v1/images/ for the catalog."]
    elif not chosen_image.is_active:
        errors["image"] = [f"Image {chosen_image.reference} is retired; choose an active image."]
    elif not errors:
        errors = cluster_problems(spec=spec, image=chosen_image, team=chosen_team, user=user)
    if errors:
        raise ValidationError(errors)
    assert chosen_image is not None
    return job_submit_checked(user=user, spec=spec, image=chosen_image, team=chosen_team, reason=reason)


def job_submit_checked(*, user: Any, spec: JobSpec, image: JobImage, team: Team, reason: str = "") -> Job:
    """Queue a submission that has passed every check of :func:`job_submit` (the API's one pass:
    jobs.validation.check_submission with ``cluster=True``), without checking it again.

    The job goes DRAFT -> SUBMITTED -> QUEUED exactly as through job_transition (the same fields and
    one JobEvent per edge), but the row is inserted in its final state and the events in one bulk
    insert: no other transaction can see, let alone lock, a row that is not committed yet, so the
    locked re-reads of job_transition would only cost queries.
    """
    actor = user.get_username()
    now = timezone.now()
    job = Job(
        **_spec_columns(spec) | {"name": spec.name.strip() or image.name},
        team=team,
        user=user,
        image=image,
        status=JobStatus.DRAFT.value,
        created_at=now,
    )
    events = [
        JobEvent(
            job=job,
            created_at=now,
            from_status="",
            to_status=JobStatus.DRAFT.value,
            actor=actor,
            reason="created",
        )
    ]
    # Quota is taken when the cycle admits the job (jobs.scheduling), not here: a job over the team's
    # free quota waits in the queue with the reason.
    for to, by, why in (
        (JobStatus.SUBMITTED, actor, reason or "submitted"),
        (JobStatus.QUEUED, "system", QUEUED_REASON),
    ):
        source = JobStatus(job.status)
        if not is_legal(source, to) or to in HOLDS_QUOTA:
            raise IllegalTransition(0, source.value, to.value)
        _apply_transition(job, source, to, why, "", now)
        events.append(
            JobEvent(
                job=job, created_at=now, from_status=source.value, to_status=to.value, actor=by, reason=why
            )
        )
    with transaction.atomic():
        job.save(force_insert=True)
        JobEvent.objects.bulk_create(events)
        dispatch.request_scheduling_cycle()
    audit.info("job submitted: id=%s team=%s by=%s", job.pk, team.slug, actor)
    return job


def _may_cancel(*, user: Any, job: Job) -> bool:
    from accounts.selectors import role_of

    role = role_of(user=user, team=job.team_id)
    return role == Role.OWNER or (role == Role.MEMBER and job.user_id == user.pk) or user.is_superuser


def job_cancel(*, job: Job, user: Any, reason: str = "") -> Job:
    """Cancel ``job`` on behalf of ``user`` (a team owner, the member who submitted it, or a superuser).

    Not yet on the cluster (DRAFT, SUBMITTED, QUEUED, REQUEUED): straight to STOPPED, quota released.
    ADMITTED, STARTING or RUNNING: STOPPING, and the backend is asked to delete its tasks once this
    commits (the stop task then finishes it as STOPPED).
    Already STOPPING: the stop is requested again, no state change. STOPPED: no change.
    SUCCEEDED or FAILED: JobConflict. Raises PermissionDenied for anyone else. Races with the scheduler
    are handled by compare-and-set: the decision is re-made if the job moved meanwhile.
    """
    if not _may_cancel(user=user, job=job):
        raise PermissionDenied("Only the job's submitter or a team owner can cancel it.")
    actor = user.get_username()
    why = reason or f"cancelled by {actor}"
    for _attempt in range(5):
        job.refresh_from_db()
        status = JobStatus(job.status)
        if status is JobStatus.STOPPING:
            # Ask again: harmless (the stop task is idempotent) and recovers a lost broker message.
            dispatch.request_stop(job.pk)
            return job
        if status is JobStatus.STOPPED:
            return job
        if status.is_terminal:
            raise JobConflict(f"Job {job.pk} already finished as {status.value}; there is nothing to cancel.")
        target = JobStatus.STOPPED if status in STOP_DIRECTLY else JobStatus.STOPPING
        with transaction.atomic():
            if job_transition(job=job, to=target, actor=actor, reason=why, expected_from=status):
                if target is JobStatus.STOPPING:
                    dispatch.request_stop(job.pk)
                audit.info("job cancelled: id=%s from=%s by=%s", job.pk, status.value, actor)
                return job
    raise JobConflict(f"Job {job.pk} keeps changing state; try again.")


def _spec_columns(spec: JobSpec) -> dict[str, Any]:
    """The Job columns that store ``spec``: each JobSpec field has a column of the same name."""
    columns = {name: copy.copy(getattr(spec, name)) for name in JobSpec.field_names()}
    # The row says "no share" with 0, and a job of whole GPUs never has a share.
    columns["gpu_milli"] = 0 if spec.gpus else (spec.gpu_milli or 0)
    columns["slowdown_tolerance"] = float(spec.slowdown_tolerance)
    return columns


def spec_of(job: Job) -> JobSpec:
    """The spec ``job`` was submitted with (the inverse of ``_spec_columns``)."""
    values = {name: copy.copy(getattr(job, name)) for name in JobSpec.field_names()}
    values["gpu_milli"] = job.gpu_milli or None
    return JobSpec(**values)


def job_clone(*, job: Job, user: Any) -> Job:
    """Submit a copy of ``job`` (same team, image and spec) as ``user``; the same rules as job_submit."""
    return job_submit(
        user=user, spec=spec_of(job), image=job.image_id, team=job.team, reason=f"clone of job {job.pk}"
    )

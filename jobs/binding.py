"""Bind an ADMITTED job: start every task on the backend, then ADMITTED -> STARTING.

Idempotent: a job not in ADMITTED is left alone, and backends treat a repeated bind of the same task
to the same place as done (deterministic task names). A gang is all or none: when a task cannot be
bound for good, the tasks already bound are deleted before the job leaves ADMITTED.

Errors: ``TransientBackendError`` propagates (the Celery task retries with backoff; the tasks bound so
far stay and the retry finishes the rest); a ``PlacementConflictError`` from any backend (the decision
went stale: GPUs taken meanwhile, the node gone, or the task still bound elsewhere) deletes what was
bound and sends the job back to QUEUED for a new decision; any other ``PermanentBackendError`` fails
the job (PLATFORM).
"""

from __future__ import annotations

import logging
from typing import Literal

from jobs import dispatch
from jobs.cluster import get_backend
from jobs.faults import fault_point
from jobs.models import Job, Task
from jobs.placements import task_placement
from jobs.services import job_transition
from jobs.states import FailureCategory, JobStatus
from jobs.sync import end_open_tasks
from scheduler.backends.base import (
    ClusterBackend,
    PermanentBackendError,
    PlacementConflictError,
    TaskSpec,
)
from workspaces.access import workspace_env

logger = logging.getLogger(__name__)
ACTOR = "scheduler"

BindOutcome = Literal["bound", "skipped", "requeued", "failed"]


def task_spec(job: Job, task: Task) -> TaskSpec:
    """What the backend starts for ``task``. The checkpoint contract (DESIGN.md §5b): every run after
    the job's first (a retry, a preemption or a migration) resumes (RESUME=1 in the task's env); the
    grace is the job's own or the platform's PREEMPTION_GRACE_SECONDS; the checkpoint folder is the
    backend's per-job one (``checkpoint_dir`` left empty)."""
    earlier_runs = job.retries + job.preemptions + job.migrations
    return TaskSpec(
        job_id=str(job.pk),
        task_id=task.name,
        rank=task.index,
        world_size=job.replicas,
        image=job.image.reference,
        command=[str(c) for c in job.command],
        args=[str(a) for a in (job.args or [])],
        env={**{str(k): str(v) for k, v in (job.env or {}).items()}, **workspace_env(job)},
        max_runtime_s=job.max_runtime_seconds,
        sim_duration_s=job.sim_duration_seconds,
        team=job.team.slug,
        user=job.user.username,
        attempt=job.retries,
        resume=earlier_runs > 0,
        grace_seconds=job.grace_seconds,
    )


def _undo(backend: ClusterBackend, job: Job) -> None:
    try:
        backend.delete_job(str(job.pk))
    except Exception:  # noqa: BLE001  (best effort: sync's orphan sweep deletes leftovers later)
        logger.warning("could not delete the tasks of job %s after a failed bind", job.pk, exc_info=True)


def job_bind(*, job_id: int, backend: ClusterBackend | None = None) -> BindOutcome:
    """Bind all tasks of ``job_id`` if it is ADMITTED. Raises TransientBackendError to be retried."""
    job = Job.objects.select_related("team", "user", "image").filter(pk=job_id).first()
    if job is None or job.status != JobStatus.ADMITTED.value:  # gone, or already handled
        return "skipped"
    backend = backend or get_backend()
    tasks = list(job.tasks.order_by("index"))
    if len(tasks) != job.replicas:
        _undo(backend, job)
        job_transition(
            job=job,
            to=JobStatus.QUEUED,
            actor=ACTOR,
            reason=f"placement incomplete ({len(tasks)} of {job.replicas} tasks); re-planning",
            expected_from=JobStatus.ADMITTED,
        )
        dispatch.request_scheduling_cycle()
        return "requeued"
    try:
        for task in tasks:
            backend.bind(task_spec(job, task), task_placement(job, task))
    except PlacementConflictError as exc:
        _undo(backend, job)
        job_transition(
            job=job,
            to=JobStatus.QUEUED,
            actor=ACTOR,
            reason=f"placement went stale ({exc}); re-planning",
            expected_from=JobStatus.ADMITTED,
        )
        dispatch.request_scheduling_cycle()
        return "requeued"
    except PermanentBackendError as exc:
        _undo(backend, job)
        if job_transition(
            job=job,
            to=JobStatus.FAILED,
            actor=ACTOR,
            reason=f"the cluster refused the job: {exc}",
            expected_from=JobStatus.ADMITTED,
            failure_category=FailureCategory.PLATFORM.value,
        ):
            end_open_tasks(job_id=job.pk, message=f"stopped: the cluster refused the job: {exc}")
        dispatch.request_scheduling_cycle()
        return "failed"
    fault_point("bind.after")  # a no-op outside the fault tests (jobs.faults)
    moved = job_transition(
        job=job,
        to=JobStatus.STARTING,
        actor=ACTOR,
        reason=f"{len(tasks)} task(s) bound on {backend.name}",
        expected_from=JobStatus.ADMITTED,
    )
    if not moved and JobStatus(job.status) not in (JobStatus.STARTING, JobStatus.RUNNING):
        # Cancelled (or failed) while we were binding: do not leave its tasks running.
        _undo(backend, job)
        return "skipped"
    return "bound" if moved else "skipped"


def job_bind_gave_up(*, job_id: int, reason: str, backend: ClusterBackend | None = None) -> bool:
    """After the bind's retries are exhausted: delete what was bound and fail the job (PLATFORM)."""
    job = Job.objects.filter(pk=job_id).first()
    if job is None or job.status != JobStatus.ADMITTED.value:
        return False
    _undo(backend or get_backend(), job)
    failed = job_transition(
        job=job,
        to=JobStatus.FAILED,
        actor=ACTOR,
        reason=f"the cluster did not accept the job: {reason}",
        expected_from=JobStatus.ADMITTED,
        failure_category=FailureCategory.PLATFORM.value,
    )
    if failed:
        end_open_tasks(job_id=job.pk, message=f"stopped: the cluster did not accept the job: {reason}")
        dispatch.request_scheduling_cycle()
    return failed

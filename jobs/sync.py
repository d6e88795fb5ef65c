"""Status sync: task phases reported by the backend drive the job state machine.

``sync_status`` (periodic, from beat) reads ``backend.task_statuses()`` once and, per job:

* STARTING/RUNNING jobs: Task rows get phase, exit code and timestamps; then
  - any task FAILED          -> the rest of the gang is deleted, job FAILED(category of that task);
  - all tasks SUCCEEDED      -> job SUCCEEDED (through RUNNING if the sync never saw it running, so the
                                event log always tells the whole story);
  - all tasks running/done   -> STARTING -> RUNNING;
  - no task known any more for longer than ``LOST_GRACE_S`` -> REQUEUED -> QUEUED (a platform fault,
    not the user's: the cluster lost the tasks, e.g. the simulated state was reset);
* STOPPING jobs: ``job_stop`` (delete on the backend, then STOPPED) in case a stop message was lost;
* tasks of jobs that already ended (STOPPED/FAILED) but still run on the backend are deleted.

Every change goes through ``job_transition`` with ``expected_from`` (compare-and-set), so a sync that
races a cancel or another sync changes nothing twice. Quota is released by ``job_transition`` when a
job ends; a job's end triggers a scheduling cycle because GPUs just became free.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from dataclasses import dataclass, field

from django.utils import timezone

from jobs import dispatch
from jobs.cluster import get_backend
from jobs.models import Job, Task
from jobs.services import job_transition
from jobs.states import FailureCategory, JobStatus
from scheduler.backends.base import ClusterBackend, TaskPhase, TaskStatus

logger = logging.getLogger(__name__)
ACTOR = "system"
LOST_GRACE_S = 60.0


@dataclass
class SyncResult:
    transitions: list[tuple[int, str]] = field(default_factory=list)
    orphans_deleted: list[str] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        return any(JobStatus(to).is_terminal or to == JobStatus.QUEUED.value for _, to in self.transitions)


def _when(ts: float | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC) if ts is not None else None


def _update_tasks(job: Job, statuses: list[TaskStatus]) -> None:
    by_name = {t.name: t for t in job.tasks.all()}
    for st in statuses:
        task = by_name.get(st.task_id)
        if task is None:
            continue
        values = {
            "phase": st.phase.value,
            "exit_code": st.exit_code,
            "message": st.message[:2000],
            "started_at": _when(st.started_at),
            "finished_at": _when(st.finished_at),
        }
        if any(getattr(task, k) != v for k, v in values.items()):
            Task.objects.filter(pk=task.pk).update(**values)


def _move(
    result: SyncResult, job: Job, to: JobStatus, source: JobStatus, reason: str, category: str = ""
) -> bool:
    moved = job_transition(
        job=job, to=to, actor=ACTOR, reason=reason, expected_from=source, failure_category=category
    )
    if moved:
        result.transitions.append((job.pk, to.value))
    return moved


def _sync_job(result: SyncResult, job: Job, statuses: list[TaskStatus], backend: ClusterBackend) -> None:
    source = JobStatus(job.status)
    _update_tasks(job, statuses)
    if not statuses:
        idle_for = (timezone.now() - job.updated_at).total_seconds()
        if idle_for > LOST_GRACE_S and _move(
            result, job, JobStatus.REQUEUED, source, "the cluster no longer knows this job's tasks"
        ):
            _move(result, job, JobStatus.QUEUED, JobStatus.REQUEUED, "requeued after the tasks were lost")
        return
    failed = [st for st in statuses if st.phase is TaskPhase.FAILED]
    if failed:
        first = failed[0]
        backend.delete_job(str(job.pk))  # a gang fails together: stop the other replicas
        category = first.failure_category or FailureCategory.USER.value
        reason = f"task {first.task_id} failed (exit code {first.exit_code}): {first.message}"
        _move(result, job, JobStatus.FAILED, source, reason, category)
        return
    succeeded = [st for st in statuses if st.phase is TaskPhase.SUCCEEDED]
    started = [st for st in statuses if st.phase in (TaskPhase.RUNNING, TaskPhase.SUCCEEDED)]
    if source is JobStatus.STARTING and len(started) >= job.replicas:
        nodes = sorted({st.node for st in statuses})
        if not _move(
            result,
            job,
            JobStatus.RUNNING,
            source,
            f"all {job.replicas} task(s) running on {', '.join(nodes)}",
        ):
            return
        source = JobStatus.RUNNING
    if source is JobStatus.RUNNING and len(succeeded) >= job.replicas:
        _move(result, job, JobStatus.SUCCEEDED, source, f"all {job.replicas} task(s) exited with code 0")


def job_stop(*, job_id: int, backend: ClusterBackend | None = None) -> bool:
    """Delete a STOPPING job's tasks on the backend, then STOPPING -> STOPPED. Idempotent."""
    job = Job.objects.filter(pk=job_id).first()
    if job is None or job.status != JobStatus.STOPPING.value:
        return False
    (backend or get_backend()).delete_job(str(job.pk))
    stopped = job_transition(
        job=job,
        to=JobStatus.STOPPED,
        actor=ACTOR,
        reason="tasks deleted from the cluster",
        expected_from=JobStatus.STOPPING,
    )
    if stopped:
        dispatch.request_scheduling_cycle()
    return stopped


def sync_status(*, backend: ClusterBackend | None = None) -> SyncResult:
    """One pass over the backend's task statuses; see the module docstring."""
    backend = backend or get_backend()
    result = SyncResult()
    by_job: dict[str, list[TaskStatus]] = defaultdict(list)
    for st in backend.task_statuses():
        by_job[st.job_id].append(st)

    active = Job.objects.filter(status__in=[JobStatus.STARTING.value, JobStatus.RUNNING.value])
    for job in active.prefetch_related("tasks"):
        _sync_job(result, job, by_job.get(str(job.pk), []), backend)

    for job_id in Job.objects.filter(status=JobStatus.STOPPING.value).values_list("pk", flat=True):
        if job_stop(job_id=job_id, backend=backend):
            result.transitions.append((job_id, JobStatus.STOPPED.value))

    # Tasks still running for jobs that ended (a cancel raced a bind, a worker died mid-way).
    live = {job_id for job_id, sts in by_job.items() if any(not st.phase.finished for st in sts)}
    ours = {int(j) for j in live if j.isdigit()}
    ended = Job.objects.filter(
        pk__in=ours, status__in=[JobStatus.STOPPED.value, JobStatus.FAILED.value, JobStatus.SUCCEEDED.value]
    ).values_list("pk", flat=True)
    for job_id in ended:
        backend.delete_job(str(job_id))
        result.orphans_deleted.append(str(job_id))

    if result.ended:
        dispatch.request_scheduling_cycle()
    return result

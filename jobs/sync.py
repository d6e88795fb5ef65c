"""Status sync: task phases reported by the backend drive the job state machine.

``sync_status`` (periodic, from beat) reads ``backend.task_statuses()`` once and, per job:

* STARTING/RUNNING jobs: Task rows get phase, exit code and timestamps; then
  - any task FAILED with a platform fault (category PLATFORM or HARDWARE) while the job has retries
    left (``retries < max_retries``) -> the job's tasks are deleted on the backend, ``retries`` goes up
    by one, and the job goes REQUEUED -> QUEUED (reasons name the failure and the retry number); the
    next scheduling cycle places it afresh (see "Retries" below);
  - any other task FAILED  -> the rest of the gang is deleted, job FAILED(category of that task);
    USER, OOM, TIMEOUT and IMAGE failures are never retried (running again would fail again);
  - all tasks SUCCEEDED      -> job SUCCEEDED (through RUNNING if the sync never saw it running, so the
                                event log always tells the whole story);
  - all tasks running/done   -> STARTING -> RUNNING;
  - no task known any more: left to the reconciler (``jobs.reconcile``), which treats it as a
    PLATFORM failure after ``RECONCILE_LOST_GRACE_SECONDS``, retried as ``max_retries`` allows;
* PREEMPTING jobs (``_sync_preempting``): once every task stopped (finished, or gone from the
  backend) the job goes PREEMPTING -> REQUEUED -> QUEUED (reasons name the rule and the preemptor),
  its finished tasks are deleted on the backend (same names next run; the checkpoint folder stays) and
  a cycle is requested; a job that ended by itself during its grace (every task SUCCEEDED, or one
  FAILED without the backend's "preempted" mark) ends SUCCEEDED or FAILED instead; tasks still
  running ``PREEMPT_KILL_SLACK_S`` after the grace are deleted (the backend did not kill them);
* STOPPING jobs: ``job_stop`` (delete on the backend, then STOPPED) in case a stop message was lost;
* tasks of jobs that already ended (STOPPED/FAILED) but still run on the backend are deleted.

Retries. Task names are deterministic (``job-<id>-<index>``) and stay the same on every run: the
backend's previous run is deleted before the job is requeued (the local backend archives its folder
when the task is bound again, the simulated backend forgets it, Kubernetes deletes the pod), and the
next admission overwrites the job's Task rows in place (new placement, phase PENDING, no exit code or
times). The history of earlier runs is the JobEvent log: the REQUEUED event's reason carries the
failed task, its category, exit code and message, and the retry number. ``TaskSpec.attempt`` tells
the backend which run it is binding (``Job.retries``).

Ended tasks. A Task row never stays PENDING/STARTING/RUNNING once its job no longer runs it: when a
job is STOPPED (cancel), requeued, or FAILED because another replica failed, its unfinished Task rows
are marked ended: phase FAILED, no exit code, ``finished_at`` now, and a message that starts with
``stopped:`` and says why (``stopped: the job was cancelled``, ``stopped: task job-7-1 failed``), or
``lost:`` when the cluster lost the task. TaskPhase has no separate "stopped" value: FAILED plus the
message is the convention, and the job's own status (STOPPED) is the authority on what happened.

Cost. A pass costs what changed, not what runs: STARTING/RUNNING jobs and their Task rows are read
as plain values in two queries and compared with the backend's report; only jobs whose tasks changed
are written (task rows in one bulk update, moves in one ``job_transition_many`` per edge and batch),
and a job with a failed task alone is loaded as a model. ``SettledTasks`` lets a caller that is the
only writer of its jobs (the trace replay) skip even the read of jobs whose report did not change.

Every change goes through ``job_transition`` or ``job_transition_many`` with ``expected_from``
(compare-and-set), so a sync that races a cancel or another sync changes nothing twice. Quota is released by ``job_transition`` when a
job ends (a requeued job keeps its quota: REQUEUED and QUEUED hold it); a job's end or requeue
triggers a scheduling cycle because GPUs just became free.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs import dispatch
from jobs.cluster import get_backend
from jobs.models import Job, Task
from jobs.services import job_transition, job_transition_many
from jobs.states import TERMINAL, FailureCategory, JobStatus
from scheduler.backends.base import ClusterBackend, TaskPhase, TaskStatus

logger = logging.getLogger(__name__)
ACTOR = "system"
LOST_GRACE_S = 60.0
# Failures of the platform, not of the job: worth running the job again (up to Job.max_retries).
RETRYABLE_CATEGORIES = frozenset({FailureCategory.PLATFORM.value, FailureCategory.HARDWARE.value})
OPEN_PHASES = (TaskPhase.PENDING.value, TaskPhase.STARTING.value, TaskPhase.RUNNING.value)
CANCELLED_MESSAGE = "stopped: the job was cancelled"
# Beyond its grace, how long a preempted job's tasks may still be reported running before the sync
# deletes them (the backend's kill may have been lost).
PREEMPT_KILL_SLACK_S = 60.0
# Jobs per batch between two ``progress`` calls: under a submission burst one pass can take minutes
# (each transition is a locked read, a write and an event), and a pass that only stamped the
# heartbeat at its end would look dead to the health check while it is working through a backlog.
SYNC_BATCH = 50


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


def end_open_tasks(*, job_id: int, message: str) -> int:
    """Mark the job's unfinished Task rows as ended (FAILED, ``message``, finished now); returns how
    many. See "Ended tasks" in the module docstring for the convention."""
    return Task.objects.filter(job_id=job_id, phase__in=OPEN_PHASES).update(
        phase=TaskPhase.FAILED.value, exit_code=None, message=message[:2000], finished_at=timezone.now()
    )


def _failure_text(st: TaskStatus, category: str) -> str:
    how = f"exit code {st.exit_code}" if st.exit_code is not None else category
    return f"task {st.task_id} failed ({how}): {st.message}"


def _retry(result: SyncResult, job: Job, source: JobStatus, first: TaskStatus, category: str) -> None:
    """RUNNING/STARTING -> REQUEUED -> QUEUED with ``retries`` + 1; the backend already deleted the run."""
    attempt = job.retries + 1
    what = _failure_text(first, category)
    with transaction.atomic():
        if not _move(
            result,
            job,
            JobStatus.REQUEUED,
            source,
            f"{what}; a {category} failure, retrying (retry {attempt} of {job.max_retries})",
        ):
            return
        Job.objects.filter(pk=job.pk).update(retries=F("retries") + 1)
        end_open_tasks(job_id=job.pk, message=f"stopped: retrying the job after task {first.task_id} failed")
        _move(
            result,
            job,
            JobStatus.QUEUED,
            JobStatus.REQUEUED,
            f"retry {attempt} of {job.max_retries} after a {category} failure of task {first.task_id}; "
            "waiting for the next scheduling cycle",
        )
    logger.info("job %s requeued for retry %s of %s (%s)", job.pk, attempt, job.max_retries, category)


def _sync_job(result: SyncResult, job: Job, statuses: list[TaskStatus], backend: ClusterBackend) -> None:
    source = JobStatus(job.status)
    _update_tasks(job, statuses)
    if not statuses:
        return  # lost tasks are the reconciler's (jobs.reconcile): a PLATFORM failure, retried as allowed
    failed = [st for st in statuses if st.phase is TaskPhase.FAILED]
    if failed:
        first = failed[0]
        # A gang fails (or is retried) together: stop the other replicas first. Deleting before the
        # requeue also gives a retry a clean slate on the backend (same task ids, fresh runs).
        backend.delete_job(str(job.pk))
        category = first.failure_category or FailureCategory.USER.value
        if category in RETRYABLE_CATEGORIES and job.retries < job.max_retries:
            _retry(result, job, source, first, category)
            return
        if _move(result, job, JobStatus.FAILED, source, _failure_text(first, category), category):
            end_open_tasks(job_id=job.pk, message=f"stopped: task {first.task_id} failed")
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


def _preemption_text(job: Job) -> str:
    rule = job.preemption_rule or "preemption"
    by = f" for job {job.preempted_for_id}" if job.preempted_for_id else ""
    return f"rule {rule}{by}"


def _sync_preempting(
    result: SyncResult, job: Job, statuses: list[TaskStatus], backend: ClusterBackend, grace: float
) -> None:
    """PREEMPTING: wait for the tasks to stop, then requeue (or end, if the job ended by itself)."""
    _update_tasks(job, statuses)
    source = JobStatus.PREEMPTING
    running = [st for st in statuses if not st.phase.finished]
    if running:
        since = job.preempted_at or job.updated_at
        if (timezone.now() - since).total_seconds() > grace + PREEMPT_KILL_SLACK_S:
            logger.warning("job %s still runs %ss after its preemption grace: deleting it", job.pk, grace)
            backend.delete_job(str(job.pk))
        return
    preempted = [st for st in statuses if st.message.startswith("preempted")]
    own_failure = [st for st in statuses if st.phase is TaskPhase.FAILED and st not in preempted]
    what = _preemption_text(job)
    if statuses and not preempted and len(statuses) >= job.replicas and not own_failure:
        if _move(
            result,
            job,
            JobStatus.SUCCEEDED,
            source,
            f"all {job.replicas} task(s) exited with code 0 during the preemption grace ({what})",
        ):
            Job.objects.filter(pk=job.pk).update(planned_placement=[])
        return
    if own_failure and not preempted:
        first = own_failure[0]
        category = first.failure_category or FailureCategory.USER.value
        if category not in RETRYABLE_CATEGORIES:
            if _move(result, job, JobStatus.FAILED, source, _failure_text(first, category), category):
                end_open_tasks(job_id=job.pk, message=f"stopped: task {first.task_id} failed")
                Job.objects.filter(pk=job.pk).update(planned_placement=[])
            return
    # Finished tasks keep their names on the backend (Kubernetes pods, local folders): clear them so
    # the next run can be bound under the same names. The checkpoint folder is kept by the backend.
    backend.delete_job(str(job.pk))
    waited = (timezone.now() - job.preempted_at).total_seconds() if job.preempted_at else 0.0
    with transaction.atomic():
        if not _move(
            result,
            job,
            JobStatus.REQUEUED,
            source,
            f"preempted ({what}); its tasks stopped after {waited:.0f} s of its {grace:g} s grace",
        ):
            return
        end_open_tasks(job_id=job.pk, message=f"preempted: {what}")
        _move(
            result,
            job,
            JobStatus.QUEUED,
            JobStatus.REQUEUED,
            f"requeued after preemption ({what}); it resumes from its checkpoint when placed again",
        )


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
        end_open_tasks(job_id=job.pk, message=CANCELLED_MESSAGE)
        dispatch.request_scheduling_cycle()
    return stopped


def _end_tasks_of_ended_jobs() -> None:
    """Task rows left open by a job that ended elsewhere (a cancel of a QUEUED or REQUEUED job that
    kept rows of an earlier placement, a bind that gave up): mark them ended too."""
    open_tasks = Task.objects.filter(phase__in=OPEN_PHASES, job__status__in=[s.value for s in TERMINAL])
    for job_id, status in open_tasks.order_by().values_list("job_id", "job__status").distinct():
        message = (
            CANCELLED_MESSAGE if status == JobStatus.STOPPED.value else f"stopped: the job ended {status}"
        )
        end_open_tasks(job_id=job_id, message=message)


# What the sync stores of a task: the fields it compares with the backend's report.
TASK_FIELDS = ("phase", "exit_code", "message", "started_at", "finished_at")
ACTIVE = (JobStatus.STARTING.value, JobStatus.RUNNING.value)


def _reported(st: TaskStatus) -> tuple[object, ...]:
    """A backend status as its Task row stores it (``TASK_FIELDS`` order)."""
    return (st.phase.value, st.exit_code, st.message[:2000], _when(st.started_at), _when(st.finished_at))


@dataclass
class _ActiveJob:
    """A STARTING or RUNNING job as two flat queries give it: no model instance unless it must move."""

    pk: int
    status: JobStatus
    replicas: int
    tasks: dict[str, tuple[int, tuple[object, ...]]] = field(default_factory=dict)  # name -> (pk, stored)


@dataclass
class _Change:
    job: _ActiveJob
    verdict: str  # "fail", "run", "succeed" or "" (only task fields changed)
    statuses: list[TaskStatus]
    edits: list[tuple[int, tuple[object, ...]]]  # (Task pk, new values) of rows that differ


def _verdict(job: _ActiveJob, statuses: list[TaskStatus]) -> str:
    """What the reported statuses ask of the job: "fail" (a task failed), "run" (STARTING -> RUNNING),
    "succeed" (-> SUCCEEDED, through RUNNING if the sync never saw it running) or "" (nothing)."""
    if not statuses:
        return ""  # lost tasks are the reconciler's (jobs.reconcile)
    if any(st.phase is TaskPhase.FAILED for st in statuses):
        return "fail"
    succeeded = sum(1 for st in statuses if st.phase is TaskPhase.SUCCEEDED)
    started = sum(1 for st in statuses if st.phase in (TaskPhase.RUNNING, TaskPhase.SUCCEEDED))
    if job.status is JobStatus.STARTING and started < job.replicas:
        return ""
    if succeeded >= job.replicas:
        return "succeed"
    return "run" if job.status is JobStatus.STARTING else ""


def _active_jobs(only: set[int] | None = None) -> list[_ActiveJob]:
    """Every STARTING/RUNNING job (or those of them in ``only``) with what its Task rows hold,
    oldest-changed first: two queries of plain values (no model instances, no prefetch)."""
    job_rows = Job.objects.filter(status__in=ACTIVE)
    task_rows = Task.objects.filter(job__status__in=ACTIVE)
    if only is not None:
        job_rows, task_rows = job_rows.filter(pk__in=only), task_rows.filter(job_id__in=only)
    jobs = {
        pk: _ActiveJob(pk, JobStatus(status), replicas)
        for pk, status, replicas in job_rows.order_by("updated_at", "pk").values_list(
            "pk", "status", "replicas"
        )
    }
    rows = task_rows.values_list("pk", "job_id", "name", *TASK_FIELDS)
    for pk, job_id, name, *stored in rows:
        job = jobs.get(job_id)
        if job is not None:  # it moved on between the two queries: the next pass has it
            job.tasks[name] = (pk, tuple(stored))
    return list(jobs.values())


def _changes(active: list[_ActiveJob], by_job: dict[str, list[TaskStatus]]) -> list[_Change]:
    """The active jobs whose reported tasks differ from their rows, or that must move."""
    out = []
    for job in active:
        statuses = by_job.get(str(job.pk), [])
        edits = []
        for st in statuses:
            stored = job.tasks.get(st.task_id)
            if stored is not None and stored[1] != (values := _reported(st)):
                edits.append((stored[0], values))
        verdict = _verdict(job, statuses)
        if verdict or edits:
            out.append(_Change(job, verdict, statuses, edits))
    return out


def _store_tasks(edits: list[tuple[int, tuple[object, ...]]]) -> None:
    if edits:
        rows = [Task(pk=pk, **dict(zip(TASK_FIELDS, values, strict=True))) for pk, values in edits]
        Task.objects.bulk_update(rows, list(TASK_FIELDS))


def _move_many(result: SyncResult, changes: list[_Change]) -> None:
    """STARTING -> RUNNING, then RUNNING -> SUCCEEDED, each edge one bulk transition for the batch."""
    order = [c.job.pk for c in changes]
    running = {
        c.job.pk: f"all {c.job.replicas} task(s) running on {', '.join(sorted({st.node for st in c.statuses}))}"
        for c in changes
        if c.job.status is JobStatus.STARTING
    }
    ran = set(
        job_transition_many(
            reasons=running, to=JobStatus.RUNNING, expected_from=JobStatus.STARTING, actor=ACTOR
        )
    )
    result.transitions += [(pk, JobStatus.RUNNING.value) for pk in order if pk in ran]
    done = {
        c.job.pk: f"all {c.job.replicas} task(s) exited with code 0"
        for c in changes
        if c.verdict == "succeed" and (c.job.status is JobStatus.RUNNING or c.job.pk in ran)
    }
    ended = set(
        job_transition_many(
            reasons=done, to=JobStatus.SUCCEEDED, expected_from=JobStatus.RUNNING, actor=ACTOR
        )
    )
    result.transitions += [(pk, JobStatus.SUCCEEDED.value) for pk in order if pk in ended]


class SettledTasks:
    """What one long-lived caller's database already agrees with: per task, the backend's last
    report, kept for jobs that needed nothing more (their rows hold it and no move was due).

    A pass given one (``sync_status(settled=...)``) reads from the database only the jobs with a
    task whose report differs from it, so a pass where a few tasks changed costs a few rows, not a
    read of every active job. It is opt-in, for a caller that is the only writer of those jobs'
    task rows and status (``manage.py replay``): a report that never changes is never re-compared,
    so a change made behind the caller's back would be missed. Without it every pass compares
    every active job (level-triggered: what the workers run).
    """

    def __init__(self) -> None:
        self.reports: dict[str, tuple[object, ...]] = {}

    def unsettled(self, by_job: dict[str, list[TaskStatus]]) -> set[int]:
        """Jobs with a task reported differently from what was settled; forgets vanished tasks."""
        reported = {st.task_id for sts in by_job.values() for st in sts}
        for task_id in [t for t in self.reports if t not in reported]:
            del self.reports[task_id]
        return {
            int(job_id)
            for job_id, sts in by_job.items()
            if job_id.isdigit() and any(self.reports.get(st.task_id) != _reported(st) for st in sts)
        }

    def settle(self, statuses: list[TaskStatus]) -> None:
        for st in statuses:
            self.reports[st.task_id] = _reported(st)


def _sync_active(
    result: SyncResult,
    by_job: dict[str, list[TaskStatus]],
    backend: ClusterBackend,
    step: Callable[[], None],
    batch_size: int,
    settled: SettledTasks | None = None,
) -> set[int]:
    """STARTING/RUNNING jobs, at a cost that grows with what changed, not with what runs.

    Their stored task state comes from two flat queries and is compared with the backend's report;
    an unchanged job costs nothing more. Per batch of changed jobs (oldest-changed first), in one
    transaction: the changed Task rows in one bulk update, then the moves in one bulk transition per
    edge (``_move_many``). A job with a failed task is loaded and takes the per-job path
    (``_sync_job``: stop the gang, then retry or fail), as failures are rare and touch the backend.
    With ``settled`` only the jobs it does not know settled are read. Returns the ids of the jobs
    it read as active.
    """
    active = _active_jobs(settled.unsettled(by_job) if settled is not None else None)
    changes = _changes(active, by_job)
    if settled is not None:
        moving = {c.job.pk for c in changes if c.verdict}
        for job in active:
            if job.pk not in moving and job.tasks:
                settled.settle(by_job.get(str(job.pk), []))
    size = max(1, batch_size)
    for start in range(0, len(changes), size):
        batch = changes[start : start + size]
        with transaction.atomic():
            _store_tasks([edit for c in batch if c.verdict != "fail" for edit in c.edits])
            _move_many(result, [c for c in batch if c.verdict in ("run", "succeed")])
        for c in batch:
            if c.verdict == "fail":
                job = (
                    Job.objects.filter(pk=c.job.pk, status=c.job.status.value)
                    .prefetch_related("tasks")
                    .first()
                )
                if job is not None:
                    _sync_job(result, job, c.statuses, backend)
        for _ in batch:
            step()
    return {job.pk for job in active}


def sync_status(
    *,
    backend: ClusterBackend | None = None,
    progress: Callable[[], None] | None = None,
    batch_size: int = SYNC_BATCH,
    settled: SettledTasks | None = None,
) -> SyncResult:
    """One pass over the backend's task statuses; see the module docstring.

    Jobs are walked oldest-changed first (``updated_at``), so a backlog is worked off in the order
    it built up, and ``progress`` (the sync task stamps its heartbeat there) is called after every
    ``batch_size`` jobs and once at the end of the walk. ``settled``: see :class:`SettledTasks`.
    """
    backend = backend or get_backend()
    result = SyncResult()
    by_job: dict[str, list[TaskStatus]] = defaultdict(list)
    for st in backend.task_statuses():
        by_job[st.job_id].append(st)
    seen = 0

    def step() -> None:
        nonlocal seen
        seen += 1
        if progress is not None and seen % max(1, batch_size) == 0:
            progress()

    known = _sync_active(result, by_job, backend, step, batch_size, settled)

    preempting = Job.objects.filter(status=JobStatus.PREEMPTING.value).order_by("updated_at", "pk")
    for job in preempting.prefetch_related("tasks"):
        known.add(job.pk)
        _sync_preempting(result, job, by_job.get(str(job.pk), []), backend, job.grace_seconds)
        step()
    if progress is not None:
        progress()

    for job_id in Job.objects.filter(status=JobStatus.STOPPING.value).values_list("pk", flat=True):
        if job_stop(job_id=job_id, backend=backend):
            result.transitions.append((job_id, JobStatus.STOPPED.value))

    # Tasks still running for jobs that ended (a cancel raced a bind, a worker died mid-way). Jobs
    # this pass just read as active or preempting are not asked about again.
    live = {job_id for job_id, sts in by_job.items() if any(not st.phase.finished for st in sts)}
    ours = {int(j) for j in live if j.isdigit()} - known
    ended = Job.objects.filter(
        pk__in=ours, status__in=[JobStatus.STOPPED.value, JobStatus.FAILED.value, JobStatus.SUCCEEDED.value]
    ).values_list("pk", flat=True)
    for job_id in ended:
        backend.delete_job(str(job_id))
        result.orphans_deleted.append(str(job_id))

    _end_tasks_of_ended_jobs()
    if result.ended:
        dispatch.request_scheduling_cycle()
    return result

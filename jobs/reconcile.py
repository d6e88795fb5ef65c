"""The reconciler: level-triggered recovery. Every beat, every non-final job is compared with the
backend and driven on, so that no job depends on one message arriving.

Kubernetes controllers and Kueue work this way: they re-read the whole state instead of trusting the
event that should have moved it. A bind message lost with a killed worker or an emptied Redis, a stop
whose delete never went through, a preemption whose job ignores SIGTERM: each is found here, by age in
the job's current state (``Job.updated_at``, set by every transition), within one reconcile interval
of its deadline.

Cases (the ``RECONCILE_*`` settings give the times):

* **ADMITTED with no bind** for ``REBIND_AFTER``: bind again, here and now (``binding.job_bind`` is
  idempotent: deterministic task names, an existing task on the same place is done, the STARTING
  transition is a compare-and-set). A job that is still ADMITTED ``BIND_GIVE_UP`` after its admission
  (its binds keep failing) has its placement forgotten: whatever was bound is deleted, its Task rows
  are ended, its reservation is released (the cycle reserves the GPUs of ADMITTED jobs only) and it
  goes back to QUEUED with a reason; the third time, it FAILS (PLATFORM) instead of looping.
* **STARTING beyond ``START_TIMEOUT``** (Kueue's waitForPodsReady): a task whose message says the image
  cannot be pulled fails the job as IMAGE; otherwise the cause is the platform (no node ran it), and
  the job is requeued (deleted first), up to ``MAX_PLATFORM_REQUEUES`` times, then FAILED(PLATFORM).
* **A task the backend lost** (STARTING or RUNNING, and the backend shows none of the job's tasks for
  ``LOST_GRACE``): a PLATFORM failure, retried as the job allows (``retries < max_retries``: REQUEUED
  -> QUEUED with ``retries`` + 1), else FAILED(PLATFORM).
* **STOPPING that never stops** (``STOP_FORCE`` after the cancel): the delete is forced and the job
  is STOPPED; sync's orphan sweep deletes anything the backend still runs for an ended job.
* **PREEMPTING beyond its grace period plus ``PREEMPT_MARGIN``**: the job is deleted (the backend's
  kill) and goes REQUEUED -> QUEUED, as the preemption would have.
* **REQUEUED for ``REQUEUE_AFTER``**: a worker died between the two halves of a requeue: QUEUED.

Every move is a ``job_transition`` with ``expected_from``, so a reconcile pass that races a sync, a
bind or a cancel changes nothing twice. A transient backend error while listing the tasks ends the
pass (the next beat retries); one job's error is logged and the pass goes on with the others.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs import binding, dispatch, heartbeat
from jobs.cluster import get_backend
from jobs.models import Job
from jobs.services import job_transition
from jobs.states import FailureCategory, JobStatus
from jobs.sync import end_open_tasks, job_stop
from scheduler.backends.base import ClusterBackend, TaskPhase, TaskStatus, TransientBackendError

logger = logging.getLogger(__name__)
ACTOR = "reconciler"

REBIND_REASON = "reconciler: the bind did not complete"
START_TIMEOUT_REASON = "reconciler: start timeout"
MAX_BIND_GIVE_UPS = 3
MAX_PLATFORM_REQUEUES = 3
# What a runtime says when it cannot get the image (Kubernetes waiting reasons, Docker's errors).
IMAGE_TROUBLE = re.compile(
    r"ErrImagePull|ImagePullBackOff|InvalidImageName|ErrImageNeverPull|manifest unknown|pull access denied",
    re.IGNORECASE,
)


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


@dataclass(frozen=True)
class Limits:
    rebind_after_s: float
    bind_give_up_s: float
    start_timeout_s: float
    lost_grace_s: float
    stop_force_s: float
    preempt_margin_s: float
    requeue_after_s: float
    default_grace_s: float

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(
            rebind_after_s=_setting("RECONCILE_REBIND_AFTER_SECONDS", 15),
            bind_give_up_s=_setting("RECONCILE_BIND_GIVE_UP_SECONDS", 120),
            start_timeout_s=_setting("RECONCILE_START_TIMEOUT_SECONDS", 600),
            lost_grace_s=_setting("RECONCILE_LOST_GRACE_SECONDS", 30),
            stop_force_s=_setting("RECONCILE_STOP_FORCE_SECONDS", 120),
            preempt_margin_s=_setting("RECONCILE_PREEMPT_MARGIN_SECONDS", 30),
            requeue_after_s=_setting("RECONCILE_REQUEUE_AFTER_SECONDS", 30),
            default_grace_s=_setting("PREEMPTION_GRACE_SECONDS", 30),
        )


@dataclass
class ReconcileResult:
    actions: list[tuple[int, str]] = field(default_factory=list)

    def add(self, job_id: int, what: str) -> None:
        self.actions.append((job_id, what))


def _age_s(job: Job) -> float:
    return (timezone.now() - job.updated_at).total_seconds()


def _times(job: Job, reason_prefix: str) -> int:
    return job.events.filter(reason__startswith=reason_prefix).count()


def _forget_placement(job: Job, backend: ClusterBackend, why: str) -> None:
    try:
        backend.delete_job(str(job.pk))
    except Exception:  # noqa: BLE001  (a leftover makes the next bind conflict, which deletes it)
        logger.warning("could not delete job %s while forgetting its placement", job.pk, exc_info=True)
    end_open_tasks(job_id=job.pk, message=f"stopped: {why}")


def _admitted(job: Job, backend: ClusterBackend, limits: Limits, result: ReconcileResult) -> None:
    age = _age_s(job)
    if age < limits.rebind_after_s:
        return
    if age >= limits.bind_give_up_s:
        gave_up = _times(job, REBIND_REASON) + 1
        why = f"{REBIND_REASON} in {int(age)} s"
        with transaction.atomic():
            if gave_up >= MAX_BIND_GIVE_UPS:
                moved = job_transition(
                    job=job,
                    to=JobStatus.FAILED,
                    actor=ACTOR,
                    reason=f"{why} ({gave_up} placements in a row); the cluster does not accept the job",
                    expected_from=JobStatus.ADMITTED,
                    failure_category=FailureCategory.PLATFORM.value,
                )
            else:
                moved = job_transition(
                    job=job,
                    to=JobStatus.QUEUED,
                    actor=ACTOR,
                    reason=f"{why}; placement released, re-planning ({gave_up} of {MAX_BIND_GIVE_UPS})",
                    expected_from=JobStatus.ADMITTED,
                )
        if moved:
            _forget_placement(job, backend, "the bind did not complete; placement released")
            result.add(job.pk, job.status)
            dispatch.request_scheduling_cycle()
        return
    try:
        outcome = binding.job_bind(job_id=job.pk, backend=backend)
    except TransientBackendError as exc:
        logger.info("rebind of job %s failed for now (%s); the next pass tries again", job.pk, exc)
        return
    result.add(job.pk, f"rebind:{outcome}")


def _requeue(job: Job, source: JobStatus, reason: str, *, count_retry: bool) -> bool:
    with transaction.atomic():
        if not job_transition(
            job=job, to=JobStatus.REQUEUED, actor=ACTOR, reason=reason, expected_from=source
        ):
            return False
        if count_retry:
            Job.objects.filter(pk=job.pk).update(retries=F("retries") + 1)
        end_open_tasks(job_id=job.pk, message=f"stopped: {reason}")
        job_transition(
            job=job,
            to=JobStatus.QUEUED,
            actor=ACTOR,
            reason=f"{reason}; waiting for the next scheduling cycle",
            expected_from=JobStatus.REQUEUED,
        )
    dispatch.request_scheduling_cycle()
    return True


def _fail(job: Job, source: JobStatus, reason: str, category: FailureCategory) -> bool:
    with transaction.atomic():
        if not job_transition(
            job=job,
            to=JobStatus.FAILED,
            actor=ACTOR,
            reason=reason,
            expected_from=source,
            failure_category=category.value,
        ):
            return False
        end_open_tasks(job_id=job.pk, message=f"stopped: {reason}")
    dispatch.request_scheduling_cycle()
    return True


def _live(
    job: Job, statuses: list[TaskStatus], backend: ClusterBackend, limits: Limits, result: ReconcileResult
) -> None:
    source = JobStatus(job.status)
    age = _age_s(job)
    if not statuses:
        if age < limits.lost_grace_s:
            return
        backend.delete_job(str(job.pk))
        if job.retries < job.max_retries:
            reason = (
                f"the cluster lost the job's tasks (a PLATFORM failure); "
                f"retry {job.retries + 1} of {job.max_retries}"
            )
            if _requeue(job, source, reason, count_retry=True):
                result.add(job.pk, "lost:requeued")
        elif _fail(job, source, "the cluster lost the job's tasks", FailureCategory.PLATFORM):
            result.add(job.pk, "lost:failed")
        return
    if source is not JobStatus.STARTING or age < limits.start_timeout_s:
        return
    if any(st.phase is TaskPhase.FAILED for st in statuses):
        return  # sync turns failures into outcomes; nothing stalled here
    waiting = [st for st in statuses if st.phase in (TaskPhase.PENDING, TaskPhase.STARTING)]
    if not waiting and len(statuses) >= job.replicas:
        return  # all running: the next sync moves it on
    image = next((st for st in statuses if IMAGE_TROUBLE.search(st.message or "")), None)
    backend.delete_job(str(job.pk))
    if image is not None:
        reason = f"{START_TIMEOUT_REASON}: task {image.task_id} could not get its image: {image.message}"
        if _fail(job, source, reason[:1000], FailureCategory.IMAGE):
            result.add(job.pk, "start-timeout:image")
        return
    if _times(job, START_TIMEOUT_REASON) >= MAX_PLATFORM_REQUEUES:
        reason = f"{START_TIMEOUT_REASON}: not running after {int(age)} s, {MAX_PLATFORM_REQUEUES} times"
        if _fail(job, source, reason, FailureCategory.PLATFORM):
            result.add(job.pk, "start-timeout:failed")
        return
    reason = f"{START_TIMEOUT_REASON}: not running after {int(age)} s (a platform cause); requeued"
    if _requeue(job, source, reason, count_retry=False):
        result.add(job.pk, "start-timeout:requeued")


def _stopping(job: Job, backend: ClusterBackend, limits: Limits, result: ReconcileResult) -> None:
    try:
        if job_stop(job_id=job.pk, backend=backend):
            result.add(job.pk, "stopped")
            return
    except TransientBackendError:
        logger.info("stop of job %s not confirmed by the cluster yet", job.pk)
    job.refresh_from_db()
    if job.status != JobStatus.STOPPING.value or _age_s(job) < limits.stop_force_s:
        return
    # The backend never confirmed the delete: stop waiting for it. sync deletes what still runs.
    if job_transition(
        job=job,
        to=JobStatus.STOPPED,
        actor=ACTOR,
        reason=f"forced: the cluster did not confirm the stop in {int(limits.stop_force_s)} s",
        expected_from=JobStatus.STOPPING,
    ):
        end_open_tasks(job_id=job.pk, message="stopped: the job was cancelled (forced)")
        result.add(job.pk, "stop-forced")
        dispatch.request_scheduling_cycle()


def _preempting(job: Job, backend: ClusterBackend, limits: Limits, result: ReconcileResult) -> None:
    grace = (
        job.preemption_grace_seconds if job.preemption_grace_seconds is not None else limits.default_grace_s
    )
    if _age_s(job) < grace + limits.preempt_margin_s:
        return
    backend.delete_job(str(job.pk))
    reason = (
        f"reconciler: preemption forced after {int(grace)} s of grace plus {int(limits.preempt_margin_s)} s"
    )
    if _requeue(job, JobStatus.PREEMPTING, reason, count_retry=False):
        result.add(job.pk, "preempt-forced")


def _requeued(job: Job, limits: Limits, result: ReconcileResult) -> None:
    if _age_s(job) < limits.requeue_after_s:
        return
    if job_transition(
        job=job,
        to=JobStatus.QUEUED,
        actor=ACTOR,
        reason="reconciler: requeue completed",
        expected_from=JobStatus.REQUEUED,
    ):
        result.add(job.pk, "queued")
        dispatch.request_scheduling_cycle()


def reconcile(*, backend: ClusterBackend | None = None, limits: Limits | None = None) -> ReconcileResult:
    """One pass over every non-final job; see the module docstring."""
    backend = backend or get_backend()
    limits = limits or Limits.from_settings()
    result = ReconcileResult()
    by_job: dict[str, list[TaskStatus]] = defaultdict(list)
    for st in backend.task_statuses():
        by_job[st.job_id].append(st)
    watched = [
        JobStatus.ADMITTED,
        JobStatus.STARTING,
        JobStatus.RUNNING,
        JobStatus.STOPPING,
        JobStatus.REQUEUED,
    ]
    preempting = getattr(JobStatus, "PREEMPTING", None)
    if preempting is not None:
        watched.append(preempting)
    jobs = Job.objects.filter(status__in=[s.value for s in watched]).order_by("pk")
    for job in jobs:
        status = JobStatus(job.status)
        try:
            if status is JobStatus.ADMITTED:
                _admitted(job, backend, limits, result)
            elif status in (JobStatus.STARTING, JobStatus.RUNNING):
                _live(job, by_job.get(str(job.pk), []), backend, limits, result)
            elif status is JobStatus.STOPPING:
                _stopping(job, backend, limits, result)
            elif status is JobStatus.REQUEUED:
                _requeued(job, limits, result)
            elif preempting is not None and status is preempting:
                _preempting(job, backend, limits, result)
        except TransientBackendError as exc:
            logger.info("reconciling job %s: transient backend error (%s); next pass", job.pk, exc)
        except Exception:  # noqa: BLE001  (one bad job must not stall the others)
            logger.exception("reconciling job %s failed; the next pass tries again", job.pk)
    heartbeat.beat("reconcile")
    if result.actions:
        logger.info("reconciler: %s", result.actions)
    return result

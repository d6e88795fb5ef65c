"""Writes to jobs. Keyword-only, typed, atomic; every status change goes through job_transition()."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from jobs.models import Job, JobEvent
from jobs.states import HOLDS_QUOTA, JobStatus, is_legal
from quotas.services import quota_release


class IllegalTransition(Exception):
    def __init__(self, job_id: int, source: str, target: str) -> None:
        super().__init__(f"job {job_id}: {source} -> {target} is not a legal transition")
        self.source = source
        self.target = target


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
    :class:`IllegalTransition`. When the job leaves the quota-holding states its quota is released.
    """
    locked = Job.objects.select_for_update().get(pk=job.pk)
    source = JobStatus(locked.status)
    if expected_from is not None and source is not expected_from:
        job.refresh_from_db()
        return False
    if not is_legal(source, to):
        raise IllegalTransition(locked.pk, source.value, to.value)
    now = timezone.now()
    locked.status = to.value
    locked.updated_at = now
    fields = ["status", "updated_at"]
    if to is JobStatus.SUBMITTED:
        locked.submitted_at = now
        fields.append("submitted_at")
    if to is JobStatus.RUNNING and locked.started_at is None:
        locked.started_at = now
        fields.append("started_at")
    if to in (JobStatus.QUEUED, JobStatus.REQUEUED):
        locked.pending_reason = reason
        fields.append("pending_reason")
    elif to is not JobStatus.QUEUED and locked.pending_reason:
        locked.pending_reason = ""
        fields.append("pending_reason")
    if to is JobStatus.FAILED:
        locked.failure_category = failure_category or "PLATFORM"
        locked.failure_message = reason
        fields += ["failure_category", "failure_message"]
    if to.is_terminal:
        locked.finished_at = now
        fields.append("finished_at")
    locked.save(update_fields=fields)
    JobEvent.objects.create(
        job=locked, from_status=source.value, to_status=to.value, actor=actor, reason=reason
    )
    if source in HOLDS_QUOTA and to not in HOLDS_QUOTA:
        quota_release(job_id=locked.pk)
    job.refresh_from_db()
    return True

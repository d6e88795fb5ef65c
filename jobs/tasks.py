"""Celery tasks. Each takes ids, calls one service, and is safe to repeat (services compare-and-set).

Transient backend faults are retried with exponential backoff; permanent ones end in the service
(the job FAILED with a reason). Beat runs ``run_scheduling_cycle`` and ``sync_status`` every
``SCHEDULE_INTERVAL_SECONDS`` (see CELERY_BEAT_SCHEDULE in settings), so a lost message only delays.
"""

from __future__ import annotations

import logging

from celery import shared_task

from jobs import binding, scheduling, sync
from scheduler.backends.base import TransientBackendError

logger = logging.getLogger(__name__)

BIND_MAX_RETRIES = 6


@shared_task(
    name="jobs.tasks.run_scheduling_cycle",
    autoretry_for=(TransientBackendError,),
    retry_backoff=True,
    retry_backoff_max=30,
    max_retries=3,
)
def run_scheduling_cycle() -> dict[str, object] | None:
    result = scheduling.run_scheduling_cycle()
    if result is None:
        return None
    return {"admitted": result.admitted, "pending": len(result.pending)}


@shared_task(bind=True, name="jobs.tasks.bind_job", max_retries=BIND_MAX_RETRIES)
def bind_job(self, job_id: int) -> str:  # type: ignore[no-untyped-def]
    try:
        return binding.job_bind(job_id=job_id)
    except TransientBackendError as exc:
        if self.request.retries >= BIND_MAX_RETRIES:
            binding.job_bind_gave_up(job_id=job_id, reason=str(exc))
            return "failed"
        raise self.retry(exc=exc, countdown=min(2**self.request.retries, 60)) from exc


@shared_task(
    name="jobs.tasks.sync_status",
    autoretry_for=(TransientBackendError,),
    retry_backoff=True,
    retry_backoff_max=30,
    max_retries=3,
)
def sync_status() -> dict[str, object]:
    result = sync.sync_status()
    return {"transitions": result.transitions, "orphans_deleted": result.orphans_deleted}


@shared_task(
    name="jobs.tasks.stop_job",
    autoretry_for=(TransientBackendError,),
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=8,
)
def stop_job(job_id: int) -> bool:
    return sync.job_stop(job_id=job_id)

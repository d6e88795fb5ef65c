"""Celery tasks. Each takes ids, calls one service, and is safe to repeat (services compare-and-set).

Transient backend faults are retried with exponential backoff; permanent ones end in the service
(the job FAILED with a reason). Beat runs ``run_scheduling_cycle``, ``sync_status`` and ``reconcile``
every few seconds (see CELERY_BEAT_SCHEDULE in settings), so a lost message only delays: the
reconciler drives every job from the database and the backend, never from a message.

Each kind of work has its own queue (``CELERY_TASK_ROUTES``: cycle, bind, sync, reconcile) served by
its own worker under ``runplatform``, so a backlog of binds never delays a sync or a cycle.
``fault_point`` calls are no-ops outside the fault tests (jobs.faults).
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from jobs import binding, dispatch, heartbeat, outside_pods, reconcile, scheduling, sync
from jobs.colocation import colocation_sweep, interference_retrain
from jobs.faults import fault_point
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
    # Then the pods submitted with our schedulerName outside the portal, on what the cycle left.
    outside = outside_pods.schedule_outside_pods()
    if result is None:
        return None
    summary: dict[str, object] = {"admitted": result.admitted, "pending": len(result.pending)}
    if outside is not None and outside.bound:
        summary["outside_bound"] = outside.bound
    return summary


@shared_task(name="jobs.tasks.tick_scheduling_cycle")
def tick_scheduling_cycle() -> None:
    dispatch.tick_scheduling_cycle()


@shared_task(bind=True, name="jobs.tasks.bind_job", max_retries=BIND_MAX_RETRIES)
def bind_job(self, job_id: int) -> str:  # type: ignore[no-untyped-def]
    fault_point("bind.before")
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
    # Stamped per batch too: a long pass over a backlog is working, not dead.
    result = sync.sync_status(progress=lambda: heartbeat.beat("sync"))
    heartbeat.beat("sync")
    return {"transitions": result.transitions, "orphans_deleted": result.orphans_deleted}


@shared_task(name="jobs.tasks.record_colocations")
def record_colocations() -> int:
    return colocation_sweep()


@shared_task(name="jobs.tasks.sample_solo_profiles")
def sample_solo_profiles() -> int:
    from jobs.solo_sampling import solo_sample_sweep

    return solo_sample_sweep()


@shared_task(name="jobs.tasks.retrain_interference")
def retrain_interference() -> dict[str, object] | None:
    outcome = interference_retrain(min_new=settings.INTERFERENCE_RETRAIN_MIN_NEW)
    return None if outcome is None else {"accepted": outcome.accepted, "reason": outcome.reason}


@shared_task(name="jobs.tasks.reconcile")
def reconcile_jobs() -> dict[str, object]:
    # No autoretry: the next beat is the retry, and stale ticks expire (see the beat options).
    try:
        result = reconcile.reconcile()
    except TransientBackendError as exc:
        logger.warning("reconcile pass cut short by a transient backend error: %s", exc)
        return {"actions": [], "error": str(exc)}
    return {"actions": result.actions}


@shared_task(
    name="jobs.tasks.stop_job",
    autoretry_for=(TransientBackendError,),
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=8,
)
def stop_job(job_id: int) -> bool:
    return sync.job_stop(job_id=job_id)

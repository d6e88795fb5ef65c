"""Ask the workers to do something once the current transaction commits.

Services call these instead of importing Celery tasks: the enqueue happens on commit, so a worker never
sees a job id whose row is not yet visible, and a rolled-back submission enqueues nothing. Broker
outages are logged and swallowed: beat runs a cycle and a status sync every few seconds anyway, so a
lost message only delays work, it never loses it.
"""

from __future__ import annotations

import logging

from django.db import transaction

logger = logging.getLogger(__name__)


def _enqueue(task_name: str, *args: object) -> None:
    from jobs import tasks  # late import: tasks imports services, which import this module

    task = getattr(tasks, task_name)
    try:
        task.delay(*args)
    except Exception:  # noqa: BLE001  (any broker failure: beat will pick the work up)
        logger.warning(
            "could not enqueue %s%r; the periodic beat will catch up", task_name, args, exc_info=True
        )


def request_scheduling_cycle() -> None:
    """Run a scheduling cycle soon (after commit). Cheap to call often: cycles are single-flight."""
    transaction.on_commit(lambda: _enqueue("run_scheduling_cycle"))


def request_bind(job_id: int) -> None:
    """Bind an ADMITTED job's tasks on the backend (after commit)."""
    transaction.on_commit(lambda: _enqueue("bind_job", job_id))


def request_stop(job_id: int) -> None:
    """Delete a STOPPING job's tasks on the backend and finish it as STOPPED (after commit)."""
    transaction.on_commit(lambda: _enqueue("stop_job", job_id))


def request_status_sync() -> None:
    """Pull task phases from the backend soon (after commit)."""
    transaction.on_commit(lambda: _enqueue("sync_status"))

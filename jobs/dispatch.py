"""Ask the workers to do something once the current transaction commits.

Services call these instead of importing Celery tasks: the enqueue happens on commit, so a worker never
sees a job id whose row is not yet visible, and a rolled-back submission enqueues nothing. Broker
outages are logged and swallowed: beat runs a cycle, a status sync and a reconcile pass every few
seconds anyway, so a lost message only delays work, it never loses it (messages are hints; the
reconciler, jobs.reconcile, drives every job from the database and the backend).

Cycle triggers are coalesced: at most one cycle message waits in the queue however many submissions
arrive. The first trigger sets a "pending" flag with ``cache.add`` (atomic) and enqueues; later ones
see the flag and enqueue nothing; the cycle clears the flag when it starts, so a trigger that arrives
while it runs enqueues the next one. The flag expires by itself (``PENDING_TIMEOUT_S``), so a message
lost with its flag still set delays cycles by that long at most, and beat runs one meanwhile. Beat's
own ticks go through the flag too (``tick_scheduling_cycle``), so under load the cycle queue holds at
most one message.

Cycles are also spaced: a message enqueued less than ``SCHEDULE_MIN_SPACING_SECONDS`` after the last
cycle started waits out the rest of that spacing (a Celery countdown). A lone submit is scheduled at
once; a stream of them (several a second) is scheduled in batches, each cycle taking every job that
arrived while it waited, instead of one cycle per submit whose fixed cost (the snapshot, the view, the
persist) the cores would pay again each time while the web tier waits for them.
"""

from __future__ import annotations

import contextlib
import logging
import time

from celery import current_app
from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from jobs.faults import fault_point
from jobs.lease import scoped_key

logger = logging.getLogger(__name__)

PENDING_KEY = "jobs:scheduling-cycle:pending"  # scoped per database: see _pending_key
PENDING_TIMEOUT_S = 30
LAST_START_KEY = "jobs:scheduling-cycle:last-start"  # scoped per database, as PENDING_KEY


def _send(task_name: str, args: tuple[object, ...], countdown: float = 0.0) -> None:
    # By name, not by importing jobs.tasks: the tasks call the services, which call this module, so
    # an import would point back up. A process that registered the task (a worker, eager mode) runs
    # it through the task object; any other sends the name to the broker, which routes it.
    name = f"jobs.tasks.{task_name}"
    task = current_app.tasks.get(name)
    later = {"countdown": countdown} if countdown > 0 else {}
    if task is None:
        current_app.send_task(name, args=args, **later)
    elif later:
        task.apply_async(args, **later)
    else:
        task.delay(*args)


def _enqueue(task_name: str, *args: object, countdown: float = 0.0) -> None:
    try:
        _send(task_name, args, countdown)
    except Exception:  # noqa: BLE001  (any broker failure: beat will pick the work up)
        logger.warning(
            "could not enqueue %s%r; the periodic beat will catch up", task_name, args, exc_info=True
        )
        if task_name == "run_scheduling_cycle":
            _clear_pending()  # nothing is pending after all: let the next trigger try again


def _pending_key() -> str:
    return scoped_key(PENDING_KEY)


def _enqueue_cycle() -> None:
    try:
        first = cache.add(_pending_key(), 1, timeout=PENDING_TIMEOUT_S)
    except Exception:  # noqa: BLE001  (no cache: fall back to one message per trigger)
        first = True
    if first:
        wait_s = _spacing_left_s()
        _enqueue("run_scheduling_cycle", **({"countdown": wait_s} if wait_s > 0 else {}))


def _spacing_s() -> float:
    return float(settings.SCHEDULE_MIN_SPACING_SECONDS)


def _spacing_left_s() -> float:
    """Seconds until ``SCHEDULE_MIN_SPACING_SECONDS`` have passed since the last cycle started."""
    spacing = _spacing_s()
    if spacing <= 0:
        return 0.0
    try:
        last = cache.get(scoped_key(LAST_START_KEY))
    except Exception:  # noqa: BLE001  (no cache: no spacing, as before)
        return 0.0
    if last is None:
        return 0.0
    return max(0.0, min(spacing, float(last) + spacing - time.time()))


def _clear_pending() -> None:
    with contextlib.suppress(Exception):  # no cache: the flag expires by itself
        cache.delete(_pending_key())


def cycle_started() -> None:
    """Called by the cycle as it starts: triggers from now on enqueue a fresh cycle, spaced from this
    one's start."""
    _clear_pending()
    spacing = _spacing_s()
    if spacing > 0:
        with contextlib.suppress(Exception):  # no cache: no spacing
            cache.set(scoped_key(LAST_START_KEY), time.time(), timeout=max(60, int(spacing * 10)))


def tick_scheduling_cycle() -> None:
    """Beat's periodic cycle, through the same coalescing as the triggers: a beat that ticks faster
    than cycles finish adds no message while one is pending."""
    _enqueue_cycle()


def request_scheduling_cycle() -> None:
    """Run a scheduling cycle soon (after commit). Cheap to call often: triggers are coalesced."""
    transaction.on_commit(_enqueue_cycle)


def _enqueue_bind(job_id: int) -> None:
    fault_point("cycle.persisted")
    _enqueue("bind_job", job_id)


def request_bind(job_id: int) -> None:
    """Bind an ADMITTED job's tasks on the backend (after commit)."""
    transaction.on_commit(lambda: _enqueue_bind(job_id))


def request_stop(job_id: int) -> None:
    """Delete a STOPPING job's tasks on the backend and finish it as STOPPED (after commit)."""
    transaction.on_commit(lambda: _enqueue("stop_job", job_id))


def request_status_sync() -> None:
    """Pull task phases from the backend soon (after commit)."""
    transaction.on_commit(lambda: _enqueue("sync_status"))

"""Fault injection points for the fault tests (tests/e2e/test_e2e_faults.py, ``manage.py faults``).

``fault_point(name)`` is a no-op unless the environment variable ``FAULT_INJECT_FILE`` names a file.
When that file exists and its first line is ``name`` (or ``*``), the call removes the file and ends the
process at once with ``os._exit`` (no cleanup, no ack, no rollback hooks: what a kill -9 or a power
loss does). The file is a one-shot trigger, so a restarted worker carries on; the test arms the next
kill by writing the file again.

Points: ``cycle.mid`` (a cycle decided, nothing persisted yet), ``cycle.persisted`` (a placement
committed, its bind not yet enqueued), ``bind.before`` (a bind message taken, nothing bound),
``bind.after`` (the backend bound the tasks, the job not yet STARTING).
"""

from __future__ import annotations

import os

POINTS = ("cycle.mid", "cycle.persisted", "bind.before", "bind.after")


def fault_point(name: str) -> None:
    path = os.environ.get("FAULT_INJECT_FILE")
    if not path:
        return
    try:
        with open(path) as handle:
            wanted = handle.readline().strip()
    except OSError:
        return
    if wanted not in (name, "*"):
        return
    try:
        os.unlink(path)
    except OSError:
        return  # another process took this kill
    os._exit(137)

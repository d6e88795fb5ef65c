"""runplatform starts the cycle, sync and reconcile workers and beat at a lower CPU priority than the
web tier, so API requests get a core first; the bind worker (whose descendants are the local
backend's jobs) and the web tier keep the supervisor's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from jobs.management.commands.runplatform import BACKGROUND_NICE, Command, background_priority

NICENESS = [sys.executable, "-c", "import os; print(os.nice(0))"]


def _niceness_of_a_child_started_as(name: str, increment: int) -> int:
    started = subprocess.run(
        NICENESS, capture_output=True, text=True, check=True, preexec_fn=background_priority(name, increment)
    )  # noqa: PLW1509
    return int(started.stdout)


def test_background_children_run_lowered_and_the_web_and_bind_workers_do_not() -> None:
    ours = os.nice(0)
    names = ["web", *Command()._worker_commands(), "beat"]
    niceness = {name: _niceness_of_a_child_started_as(name, 3) for name in names}
    assert niceness == {
        "web": ours,
        "worker-cycle": min(19, ours + 3),
        "worker-bind": ours,
        "worker-sync": min(19, ours + 3),
        "worker-reconcile": min(19, ours + 3),
        "beat": min(19, ours + 3),
    }
    assert _niceness_of_a_child_started_as("worker-cycle", 0) == ours
    assert BACKGROUND_NICE > 0  # the default lowers them


@pytest.mark.parametrize("value", [-1, 20])
def test_a_niceness_outside_what_an_unprivileged_process_may_add_is_refused(value: int) -> None:
    with pytest.raises(CommandError, match="--background-nice must be 0-19"):
        call_command("runplatform", background_nice=value)

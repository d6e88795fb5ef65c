"""The load benchmark's CPU accounting: runplatform's processes are found below its pid (each child runs
in a session of its own) and are told apart by their command lines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from jobs.management.commands._measure import (
    _role,
    cpu_split,
    role_usage,
)


def test_runplatform_children_are_told_apart_by_their_command_lines() -> None:
    celery = [sys.executable, "-m", "celery", "-A", "config"]
    assert _role([sys.executable, "-m", "gunicorn", "config.asgi:application"]) == "web"
    assert _role([*celery, "worker", "--pool=solo", "-n", "cycle@%h", "-Q", "cycle"]) == "worker-cycle"
    assert _role([*celery, "worker", "--pool=threads", "-n", "bind@%h"]) == "worker-bind"
    assert _role([*celery, "beat", "-l", "warning"]) == "beat"
    assert _role([sys.executable, "manage.py", "runplatform"]) == "supervisor"


def test_a_grandchild_in_a_session_of_its_own_is_counted_under_the_root() -> None:
    # The grandchild lowers its priority and burns CPU under a command line read as beat's, then waits to
    # be sampled.
    grandchild = "import os, time\\nos.nice(2)\\nend = time.process_time() + 0.3\\nwhile time.process_time() < end: pass\\ntime.sleep(30)"
    child = (
        "import subprocess, sys, time\n"
        f"grandchild = subprocess.Popen([sys.executable, '-c', '{grandchild}', 'celery', 'beat'],"
        " start_new_session=True)\n"
        "print(grandchild.pid, flush=True)\n"
        "time.sleep(30)\n"
    )
    root = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    assert root.stdout is not None
    grandchild_pid = int(root.stdout.readline())
    try:
        deadline = time.monotonic() + 20
        seconds: dict[str, float] = {}
        while time.monotonic() < deadline and seconds.get("beat", 0.0) < 0.25:
            time.sleep(0.2)
            seconds = {role: usage.cpu_s for role, usage in role_usage(root.pid).items()}
        assert seconds.get("beat", 0.0) >= 0.25
        assert "supervisor" in seconds  # the root itself
        usage = role_usage(root.pid)
        assert {role: u.nice for role, u in usage.items()} == {
            "beat": min(19, os.nice(0) + 2),
            "supervisor": os.nice(0),
        }
        waited = {role: u.waited_s for role, u in usage.items()}
        assert set(waited) == {"beat", "supervisor"} and all(value >= 0 for value in waited.values())
    finally:
        os.kill(grandchild_pid, signal.SIGKILL)
        root.kill()
        root.wait()


def test_cpu_split_is_the_difference_per_role_with_the_web_tier_per_request() -> None:
    split = cpu_split({"web": 1.0, "beat": 0.5}, {"web": 3.0, "beat": 0.5, "worker-cycle": 1.0}, 0.4, 100)
    assert split == {"beat": 0.0, "web": 2.0, "worker-cycle": 1.0, "clients": 0.4, "web_ms_per_request": 20.0}
    assert role_usage(None) == {}

"""The local backend's side of a workspace: a free port of 127.0.0.1 given through the platform's
variables, $(NAME) expanded in the command as the kubelet does, a home folder per team and user, and
the address recorded for the proxy while the server runs."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

from scheduler.backends.base import TaskPhase
from scheduler.backends.local.workspace import expand_references
from tests.scheduler.backends.local_backend_helpers import PY, make_backend, placement, spec, status, wait_for

SERVE = [PY, "-m", "http.server", "--bind", "$(GPU_PLATFORM_WORKSPACE_HOST)", "--directory",
         "$(GPU_PLATFORM_WORKSPACE_HOME)", "$(GPU_PLATFORM_WORKSPACE_PORT)"]  # fmt: skip
WORKSPACE_ENV = {"GPU_PLATFORM_WORKSPACE_PORT": "8888", "GPU_PLATFORM_WORKSPACE_HOST": "0.0.0.0"}


def test_references_expand_like_kubernetes_and_unknown_ones_stay() -> None:
    env = {"PORT": "8123"}

    assert expand_references(["--port=$(PORT)", "$$(PORT)", "$(MISSING)", "$PORT"], env) == [
        "--port=8123",
        "$(PORT)",
        "$(MISSING)",
        "$PORT",
    ]


def test_a_workspace_serves_its_home_on_a_free_local_port_recorded_for_the_proxy(tmp_path: Path) -> None:
    backend = make_backend(tmp_path)
    home = backend.workspace_home(team="vision", user="ada")
    home.mkdir(parents=True)
    (home / "notes.txt").write_text("kept")
    task = spec("7", SERVE, env=dict(WORKSPACE_ENV), team="vision", user="ada")
    try:
        backend.bind(task, placement("7", milli=250))
        wait_for(lambda: (s := status(backend, "7")) and s.phase is TaskPhase.RUNNING, what="RUNNING")
        target = backend.workspace_target("7")
        assert target is not None and target.startswith("http://127.0.0.1:") and not target.endswith(":8888")

        def served() -> str | None:
            try:
                with urllib.request.urlopen(f"{target}/notes.txt", timeout=2) as response:  # noqa: S310
                    return response.read().decode()
            except OSError:
                time.sleep(0.1)
                return None

        assert wait_for(served, what="the workspace's server") == "kept"
    finally:
        backend.delete_job("7")
    wait_for(lambda: backend.workspace_target("7") is None, what="no target once stopped")


def test_a_batch_task_has_no_target_and_its_command_is_left_as_written(tmp_path: Path) -> None:
    backend = make_backend(tmp_path)
    task = spec("8", [PY, "-c", "import sys; print(sys.argv[1:])", "$(GPU_PLATFORM_JOB_ID)"])
    try:
        backend.bind(task, placement("8"))
        wait_for(lambda: (s := status(backend, "8")) and s.phase.finished, what="finished")
        assert backend.workspace_target("8") is None
        assert "['$(GPU_PLATFORM_JOB_ID)']" in backend.logs("8", "job-8-0")
    finally:
        backend.delete_job("8")

"""The JupyterLab for the job user: which Python is chosen, what is pinned, and how a workspace
task's PATH gets its folder first (jobs.workspace_runtime, scheduler.backends.local.environment)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.workspace_runtime import locked_requirements, reachable_by_others, shared_python
from scheduler.backends.base import TaskSpec
from scheduler.backends.local.environment import WORKSPACE_PATH, task_environment
from scheduler.backends.local.workspace import PORT
from scheduler.model import Placement


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder every user can traverse, as are all above it (pytest's own tmp_path is 0700)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as name:
        os.chmod(name, 0o755)
        yield Path(name)


def _program(folder: Path, name: str, mode: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\necho ran\n")
    path.chmod(mode)
    return path


def test_a_python_only_its_owner_can_read_is_skipped_for_the_next_candidate(open_dir: Path) -> None:
    private = open_dir / "private"
    shared = open_dir / "shared"
    _program(private, "python3.12", 0o700)
    _program(private, "python3.11", 0o700)  # first on the path, as pyenv's shim under /root is
    good = _program(shared, "python3.11", 0o755)
    search = os.pathsep.join([str(private), str(shared)])
    assert shared_python(("python3.12", "python3.11"), search) == good
    assert shared_python(("python3.12",), search) is None
    # The chosen one really runs.
    assert subprocess.run([str(good)], capture_output=True, text=True, check=True).stdout == "ran\n"


def test_a_link_into_a_private_folder_is_not_reachable(open_dir: Path) -> None:
    home = open_dir / "root-home"
    real = _program(home, "python3", 0o755)
    home.chmod(0o700)
    link = open_dir / "bin" / "python3"
    link.parent.mkdir()
    link.symlink_to(real)
    try:
        assert not reachable_by_others(link)
    finally:
        home.chmod(0o755)
    assert reachable_by_others(link)


def test_the_jupyterlab_packages_are_pinned_to_the_lock() -> None:
    lock = Path(__file__).resolve().parents[2] / "requirements.lock"
    pins = locked_requirements(lock, ("jupyterlab", "ipykernel", "no-such-package"))
    assert pins[0].startswith("jupyterlab==") and pins[1].startswith("ipykernel==")
    assert pins[2] == "no-such-package"


def _spec(env: dict[str, str]) -> TaskSpec:
    return TaskSpec(job_id="j1", task_id="j1-0", image="", command=["jupyter", "lab"], env=env)


def test_a_workspace_task_finds_the_workspace_jupyter_first_and_a_batch_task_does_not(
    open_dir: Path,
) -> None:
    bin_dir = open_dir / "workspace-python" / "bin"
    jupyter = _program(bin_dir, "jupyter", 0o755)
    source = {"PATH": "/usr/bin:/bin", WORKSPACE_PATH: str(bin_dir)}
    ws = task_environment(
        _spec({PORT: "8888"}),
        Placement(job_id="j1", task_id="j1-0", node="n"),
        uuids={},
        master_port=None,
        source=source,
    )
    batch = task_environment(
        _spec({}), Placement(job_id="j1", task_id="j1-0", node="n"), uuids={}, master_port=None, source=source
    )
    assert ws["PATH"].split(os.pathsep)[0] == str(bin_dir)
    assert WORKSPACE_PATH not in ws
    assert batch["PATH"] == "/usr/bin:/bin"
    found = subprocess.run(
        ["sh", "-c", "command -v jupyter"], env=ws, capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == str(jupyter)

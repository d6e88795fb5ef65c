"""Helpers for the local backend tests: a backend over a temporary folder and bounded waits."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from scheduler.backends.base import TaskPhase, TaskSpec, TaskStatus
from scheduler.backends.local import LocalBackend
from scheduler.model import Placement

NODE = "testnode"
PY = sys.executable
T = TypeVar("T")


def make_backend(work_dir: Path, **kwargs: object) -> LocalBackend:
    options: dict[str, object] = {
        "node_name": NODE,
        "gpu_mode": "virtual",
        "virtual_gpus": 2,
        "stop_grace_s": 0.5,
    }
    options.update(kwargs)
    return LocalBackend(work_dir, **options)  # type: ignore[arg-type]


def wait_for(predicate: Callable[[], T | None], timeout: float = 15.0, what: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy (bounded; fails the test otherwise)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def spec(job: str, command: list[str], *, rank: int = 0, world_size: int = 1, **kwargs: object) -> TaskSpec:
    return TaskSpec(
        job_id=job, task_id=f"job-{job}-{rank}", rank=rank, world_size=world_size, command=command, **kwargs
    )  # type: ignore[arg-type]


def placement(
    job: str, *, rank: int = 0, gpus: tuple[int, ...] = (0,), milli: int = 1000, memory: int = 0
) -> Placement:
    return Placement(
        job_id=job,
        task_id=f"job-{job}-{rank}",
        node=NODE,
        gpu_indices=gpus,
        gpu_milli=milli,
        gpu_memory_mib=memory,
        cpu_milli=100,
        memory_mib=64,
    )


def status(backend: LocalBackend, job: str, rank: int = 0) -> TaskStatus | None:
    for st in backend.task_statuses(job):
        if st.task_id == f"job-{job}-{rank}":
            return st
    return None


def finished(backend: LocalBackend, job: str, rank: int = 0) -> TaskStatus:
    def done() -> TaskStatus | None:
        st = status(backend, job, rank)
        return st if st is not None and st.phase.finished else None

    return wait_for(done, what=f"job {job} task {rank} to finish")


def running(backend: LocalBackend, job: str, rank: int = 0) -> TaskStatus:
    def up() -> TaskStatus | None:
        st = status(backend, job, rank)
        return st if st is not None and st.phase is TaskPhase.RUNNING else None

    return wait_for(up, what=f"job {job} task {rank} to run")


def gate_command(gate: Path, then: str = "print('done')") -> list[str]:
    """A Python command that waits until ``gate`` exists, then runs ``then``: the test decides when
    the task ends, without sleeping for a guessed duration."""
    return [
        PY,
        "-c",
        f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.02)\n{then}",
    ]


def stop_everything(backend: LocalBackend) -> None:
    """Test teardown: no task of a failed test may keep running (gated tasks wait forever)."""
    for job_dir in backend.jobs_dir.glob("*"):
        if job_dir.is_dir() and not job_dir.name.startswith("."):
            backend.delete_job(job_dir.name)

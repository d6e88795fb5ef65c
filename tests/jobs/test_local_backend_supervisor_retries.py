"""On the local backend a killed task supervisor (as after a reboot) counts as a platform failure: retried
when the job has a retry left, the job failed otherwise, and the orphaned command killed."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs import sync
from jobs.models import Job
from jobs.states import JobStatus
from quotas.models import Quota
from scheduler.backends.local import LocalBackend
from scheduler.backends.local import runner as files
from scheduler.backends.local.runner import group_alive
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    image,
    local_backend,
    reasons,
    researcher,
    started,
    submit,
    team,
)

PY = sys.executable
PLATFORM_ONCE = {"SIM_FAIL_CATEGORY": "PLATFORM", "SIM_FAIL_ATTEMPTS": "1"}

# ----------------------------------------------------------------------------- the local backend


@pytest.fixture
def local(tmp_path: Path, settings: Any) -> Iterator[LocalBackend]:
    yield from local_backend(settings, tmp_path, virtual_gpus=2)


def _sync_until(backend: LocalBackend, job: Job, *states: JobStatus) -> Job:
    deadline = time.monotonic() + 20
    while True:
        sync.sync_status(backend=backend)
        job.refresh_from_db()
        if job.status in {s.value for s in states}:
            return job
        assert time.monotonic() < deadline, f"job stayed {job.status}"
        time.sleep(0.05)


def _wait(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _second_run_succeeds(marker: Path) -> list[str]:
    """A command whose first run leaves ``marker`` and waits forever; a later run prints and exits 0."""
    code = (
        "import os, sys, time\n"
        "if os.path.exists(sys.argv[1]):\n"
        "    print('second run on GPU', os.environ['CUDA_VISIBLE_DEVICES'])\n"
        "else:\n"
        "    open(sys.argv[1], 'w').close()\n"
        "    print('first run', flush=True)\n"
        "    time.sleep(600)\n"
    )
    return [PY, "-c", code, str(marker)]


def _kill_the_runner(backend: LocalBackend, job: Job) -> int:
    """SIGKILL the task's supervisor (as a reboot would); returns the command's process group."""
    task_dir = backend.task_dir(str(job.pk), job.tasks.get().name)
    _wait(lambda: files.read_json(task_dir / files.STARTED_FILE) is not None, "the command to start")
    pgid = int(json.loads((task_dir / files.STARTED_FILE).read_text())["pgid"])
    os.kill(int(json.loads((task_dir / files.RUNNER_FILE).read_text())["pid"]), signal.SIGKILL)
    return pgid


def test_on_the_local_backend_a_killed_supervisor_is_retried_and_the_rerun_succeeds(
    local: LocalBackend, tmp_path: Path, researcher, image, team
) -> None:
    command = _second_run_succeeds(tmp_path / "marker")
    job = started(local, submit(researcher, image, command=command, gpus=1, cpu_milli=100, max_retries=1))
    job = _sync_until(local, job, JobStatus.RUNNING)
    # The supervisor writes its start file before Python has run a line of the command; killing it
    # earlier would end the first run before it left the marker, and the rerun would wait forever.
    _wait((tmp_path / "marker").exists, "the first run to leave its marker")
    pgid = _kill_the_runner(local, job)

    job = _sync_until(local, job, JobStatus.QUEUED, JobStatus.FAILED)

    assert (job.status, job.retries) == (JobStatus.QUEUED.value, 1)
    [why] = reasons(job, JobStatus.REQUEUED)
    assert "(PLATFORM)" in why and "vanished" in why and "retry 1 of 1" in why
    _wait(lambda: not group_alive(pgid), "the first run's orphaned command to be killed")

    started(local, job)  # same task name, bound again after delete_job: a fresh run, not a no-op
    job = _sync_until(local, job, JobStatus.SUCCEEDED, JobStatus.FAILED)

    assert job.status == JobStatus.SUCCEEDED.value
    task = job.tasks.get()
    assert local.logs(str(job.pk), task.name) == f"second run on GPU {task.gpu_indices[0]}\n"
    assert Quota.objects.get(team=team).used_gpu_milli == 0


def test_on_the_local_backend_a_killed_supervisor_without_retries_fails_the_job(
    local: LocalBackend, tmp_path: Path, researcher, image
) -> None:
    command = _second_run_succeeds(tmp_path / "marker")
    job = started(local, submit(researcher, image, command=command, gpus=1, cpu_milli=100))
    job = _sync_until(local, job, JobStatus.RUNNING)
    pgid = _kill_the_runner(local, job)

    job = _sync_until(local, job, JobStatus.QUEUED, JobStatus.FAILED)

    assert (job.status, job.failure_category) == (JobStatus.FAILED.value, "PLATFORM")
    _wait(lambda: not group_alive(pgid), "the orphaned command to be killed")

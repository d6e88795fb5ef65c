"""The platform with CLUSTER_BACKEND=local: a submitted job really runs on this machine, its output
reaches the logs endpoint's selector, and cancel stops the process."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jobs import scheduling, selectors, sync
from jobs.binding import job_bind
from jobs.cluster import cluster_view
from jobs.models import Job
from jobs.services import job_cancel
from jobs.states import JobStatus
from scheduler.backends.local import LocalBackend
from scheduler.backends.local.runner import group_alive, read_json
from tests.jobs.runtime_fixtures import image, local_backend, researcher, submit, team  # noqa: F401  (fixtures)

PY = sys.executable


@pytest.fixture
def local(tmp_path: Path, settings: Any) -> Any:
    yield from local_backend(settings, tmp_path, virtual_gpus=1)


def _started(backend: LocalBackend, job: Job) -> Job:
    scheduling.run_scheduling_cycle(backend=backend)
    assert job_bind(job_id=job.pk, backend=backend) == "bound"
    job.refresh_from_db()
    return job


def _sync_until(backend: LocalBackend, job: Job, *states: JobStatus) -> Job:
    deadline = time.monotonic() + 20
    while True:
        sync.sync_status(backend=backend)
        job.refresh_from_db()
        if job.status in {s.value for s in states}:
            return job
        assert time.monotonic() < deadline, f"job stayed {job.status}"
        time.sleep(0.05)


def test_a_quarter_gpu_job_prints_its_gpu_index_in_its_logs_and_succeeds(local, researcher, image) -> None:
    command = [PY, "-c", "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"]
    job = _started(
        local, submit(researcher, image, command=command, gpu_milli=250, cpu_milli=100, memory_mib=64)
    )
    task = job.tasks.get()
    assert (task.node, task.gpu_indices) == ("lab-server", [0])

    job = _sync_until(local, job, JobStatus.SUCCEEDED, JobStatus.FAILED)

    assert job.status == JobStatus.SUCCEEDED.value
    logs = selectors.job_logs(job=job)
    assert [(entry["task"], entry["log"]) for entry in logs] == [(task.name, "0\n")]


def test_a_job_that_exits_3_fails_as_the_users_fault(local, researcher, image) -> None:
    job = _started(local, submit(researcher, image, command=[PY, "-c", "raise SystemExit(3)"], cpu_milli=100))

    job = _sync_until(local, job, JobStatus.SUCCEEDED, JobStatus.FAILED)

    assert (job.status, job.failure_category) == (JobStatus.FAILED.value, "USER")
    assert job.tasks.get().exit_code == 3


def test_cancelling_a_running_job_stops_its_process(local, researcher, image) -> None:
    command = [PY, "-c", "import time; print('working', flush=True); time.sleep(60)"]
    job = _started(local, submit(researcher, image, command=command, gpus=1, cpu_milli=100))
    job = _sync_until(local, job, JobStatus.RUNNING)
    task = job.tasks.get()
    pgid = read_json(local.task_dir(str(job.pk), task.name) / "started.json")["pgid"]

    job_cancel(job=job, user=researcher)
    assert sync.job_stop(job_id=job.pk, backend=local)

    job.refresh_from_db()
    assert job.status == JobStatus.STOPPED.value
    deadline = time.monotonic() + 10
    while group_alive(pgid):
        assert time.monotonic() < deadline, "the cancelled job's process is still running"
        time.sleep(0.05)
    assert "working" in selectors.job_logs(job=job)[0]["log"]


def test_the_cluster_view_marks_a_node_without_a_driver_as_virtual(local) -> None:
    view = cluster_view(local)

    assert view["backend"] == "local"
    [node] = view["nodes"]
    assert node["name"] == "lab-server" and node["virtual"] is True
    assert [g["uuid"] for g in node["gpus"]] == ["virtual-0"]

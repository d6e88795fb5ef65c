"""A bind that finds the task already running somewhere else (an earlier attempt) deletes it and sends the
job back to the queue, on the local backend and on Kubernetes."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs import scheduling
from jobs.binding import job_bind, task_placement, task_spec
from jobs.states import JobStatus
from scheduler.backends.local import LocalBackend
from scheduler.backends.simulated import SimulatedBackend
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    local_backend,
    researcher,
    sim,
    submit,
    team,
)

PY = sys.executable
PLATFORM_ONCE = {"SIM_FAIL_CATEGORY": "PLATFORM", "SIM_FAIL_ATTEMPTS": "1"}


@pytest.fixture
def local(tmp_path: Path, settings: Any) -> Iterator[LocalBackend]:
    yield from local_backend(settings, tmp_path, virtual_gpus=2)


def test_on_the_local_backend_a_task_still_running_elsewhere_sends_the_job_back_to_the_queue(
    local: LocalBackend, tmp_path: Path, researcher, image
) -> None:
    job = submit(researcher, image, command=[PY, "-c", "print('hi')"], gpus=1, cpu_milli=100)
    scheduling.run_scheduling_cycle(backend=local)
    job.refresh_from_db()
    task = job.tasks.get()
    elsewhere = task_placement(job, task)
    elsewhere.gpu_indices = (1 - task.gpu_indices[0],)
    stray = task_spec(job, task)
    stray.command, stray.args = [PY, "-c", "import time; time.sleep(600)"], []
    local.bind(stray, elsewhere)  # an earlier run of the same task, on the other GPU

    assert job_bind(job_id=job.pk, backend=local) == "requeued"

    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED.value and "already runs on GPUs" in job.pending_reason
    assert local.task_statuses(str(job.pk)) == []  # the stray run was deleted: the next bind is clean


def test_on_kubernetes_a_pod_already_placed_elsewhere_sends_the_job_back_to_the_queue(
    sim: SimulatedBackend, researcher, image
) -> None:
    from scheduler.backends.kubernetes import KubernetesBackend
    from scheduler.backends.kubernetes import contract as c
    from tests.scheduler.backends.kube_emulator import PODS, add_node, running_emulator, serve_bindings

    job = submit(researcher, image, gpus=1)
    scheduling.run_scheduling_cycle(backend=sim)  # the decision: t4-1, one GPU
    job.refresh_from_db()
    task = job.tasks.get()
    # The same T4s as the simulated node the decision was made on: a whole GPU's placement holds its
    # memory, and the backend re-checks capacity at bind (a smaller GPU would refuse it first).
    gpus = [{"index": i, "uuid": f"GPU-{i}", "model": "T4", "memory_mib": 16384} for i in range(2)]
    with running_emulator() as emu:
        add_node(emu, "t4-1", annotations={c.NODE_ANN_GPUS: json.dumps(gpus)})
        serve_bindings(emu)
        kube = KubernetesBackend(
            emu.api_client(),
            namespace="gpu-jobs",
            scheduler_name="gpu-platform-scheduler",
            sleep=lambda s: None,
        )
        elsewhere = task_placement(job, task)
        elsewhere.gpu_indices = (1 - task.gpu_indices[0],)
        kube.bind(task_spec(job, task), elsewhere)  # a pod of an earlier attempt, on the other GPU

        assert job_bind(job_id=job.pk, backend=kube) == "requeued"

        live = [k for k, obj in emu.handler.objects.items() if k[0] == PODS and not obj.deleted]
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED.value and "already exists on t4-1" in job.pending_reason
    assert live == []  # deleted, so the next decision binds on a clean slate


# ----------------------------------------------------------------------------- start-up checks

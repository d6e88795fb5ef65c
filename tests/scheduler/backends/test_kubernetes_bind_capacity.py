"""The Kubernetes bind re-checks capacity against the pod annotations it reads (kmock over real HTTP).

A decision made on a stale snapshot (another cycle bound meanwhile, or an outside pod took a GPU) must
not oversubscribe a GPU: the bind answers PlacementConflictError and creates nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from scheduler.backends.base import PlacementConflictError, TaskSpec
from scheduler.backends.kubernetes import KubernetesBackend
from scheduler.backends.kubernetes import contract as c
from scheduler.model import Placement
from tests.scheduler.backends.kube_emulator import (
    PODS,
    Emulator,
    add_node,
    running_emulator,
    serve_bindings,
    stored,
)

NS = "gpu-jobs"
GPUS = json.dumps(
    [{"index": i, "uuid": f"GPU-{i:04d}", "model": "A100-SXM4-80GB", "memory_mib": 81920} for i in range(2)]
)


@pytest.fixture()
def emu() -> Iterator[Emulator]:
    with running_emulator() as emulator:
        add_node(emulator, "gpu-1", annotations={c.NODE_ANN_GPUS: GPUS})
        serve_bindings(emulator)
        yield emulator


def make_backend(emu: Emulator) -> KubernetesBackend:
    return KubernetesBackend(
        emu.api_client(), namespace=NS, scheduler_name="gpu-platform-scheduler", sleep=lambda s: None
    )


def share(job: str, gpu: int, milli: int, memory: int = 8192) -> tuple[TaskSpec, Placement]:
    spec = TaskSpec(job_id=job, task_id=f"{job}-0", image="img", command=["python", "train.py"])
    return spec, Placement(job, f"{job}-0", "gpu-1", (gpu,), gpu_milli=milli, gpu_memory_mib=memory)


def pod_exists(emu: Emulator, job: str) -> bool:
    try:
        stored(emu, PODS, NS, c.pod_name(job, f"{job}-0"))
    except (KeyError, LookupError, AssertionError):
        return False
    return True


def test_a_bind_onto_a_gpu_another_job_already_fills_is_a_conflict_and_creates_no_pod(emu: Emulator) -> None:
    backend = make_backend(emu)
    backend.bind(*share("a", 0, 700))
    with pytest.raises(PlacementConflictError, match="does not fit on gpu-1 GPU 0"):
        backend.bind(*share("b", 0, 400))  # 700 + 400 > 1000: the snapshot it was decided on was stale
    assert not pod_exists(emu, "b")


def test_a_bind_that_would_overflow_gpu_memory_is_a_conflict(emu: Emulator) -> None:
    backend = make_backend(emu)
    backend.bind(*share("a", 1, 200, memory=70000))
    with pytest.raises(PlacementConflictError):
        backend.bind(*share("b", 1, 200, memory=20000))


def test_a_bind_that_fits_beside_other_jobs_and_a_repeated_bind_are_accepted(emu: Emulator) -> None:
    backend = make_backend(emu)
    backend.bind(*share("a", 0, 600))
    backend.bind(*share("b", 0, 400))  # exactly full
    backend.bind(*share("b", 0, 400))  # the same job again: idempotent, not a conflict with itself
    assert pod_exists(emu, "b")


def test_a_whole_job_bind_checks_its_tasks_together(emu: Emulator) -> None:
    backend = make_backend(emu)
    specs = [TaskSpec(job_id="g", task_id=f"g-{r}", rank=r, world_size=2, image="img") for r in range(2)]
    placements = [
        Placement("g", f"g-{r}", "gpu-1", (0,), gpu_milli=600, gpu_memory_mib=1024) for r in range(2)
    ]
    with pytest.raises(PlacementConflictError):
        backend.bind_job(specs, placements)  # two 600 milli-GPU ranks on one GPU
    assert not pod_exists(emu, "g")

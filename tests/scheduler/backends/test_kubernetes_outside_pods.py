"""Pods created with kubectl that name our schedulerName are scheduled too (custom scheduler)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest

from scheduler.backends.kubernetes import KubernetesBackend
from scheduler.backends.kubernetes import contract as c
from scheduler.engine.schedule import schedule
from scheduler.framework import Profile
from scheduler.model import TaskRequest
from tests.scheduler.backends.kube_emulator import (
    PODS,
    Emulator,
    add_node,
    running_emulator,
    serve_bindings,
    stored,
)

SCHED = "gpu-platform-scheduler"
GPUS = json.dumps([{"index": i, "uuid": f"GPU-{i}", "model": "A10", "memory_mib": 24576} for i in range(2)])


@pytest.fixture()
def emu() -> Iterator[Emulator]:
    with running_emulator() as emulator:
        add_node(emulator, "gpu-1", cpu="16", memory="64Gi", annotations={c.NODE_ANN_GPUS: GPUS})
        yield emulator


def make_backend(emu: Emulator) -> KubernetesBackend:
    return KubernetesBackend(
        emu.api_client(), namespace="gpu-jobs", scheduler_name=SCHED, sleep=lambda s: None
    )


def kubectl_apply(
    emu: Emulator,
    name: str,
    annotations: dict[str, str],
    *,
    scheduler: str = SCHED,
    namespace: str = "research",
    **spec: Any,
) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {"name": "nb", "image": "jupyter", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}
            ],
            **spec,
        },
        "status": {"phase": "Pending"},
    }
    kubernetes.client.CoreV1Api(emu.api_client()).create_namespaced_pod(namespace, body)


def test_pending_pods_naming_our_scheduler_become_job_requests(emu: Emulator) -> None:
    kubectl_apply(emu, "half", {c.ANN_GPU_MILLI: "500", c.ANN_GPU_MEMORY_MIB: "12000"})
    kubectl_apply(emu, "kai-style", {c.KAI_GPU_FRACTION: "0.25", c.KAI_GPU_MEMORY: "4096"})
    kubectl_apply(emu, "two", {c.ANN_GPUS: "2"}, priority=10)
    kubectl_apply(emu, "default-sched", {c.ANN_GPUS: "1"}, scheduler="default-scheduler")
    kubectl_apply(emu, "running", {c.ANN_GPUS: "1"}, nodeName="gpu-1")

    jobs, invalid = make_backend(emu).outside_jobs()

    assert invalid == {}
    by_id = {job.job_id: job for job in jobs}
    assert sorted(by_id) == ["pod:research/half", "pod:research/kai-style", "pod:research/two"]
    assert by_id["pod:research/half"].tasks == [
        TaskRequest("research/half", cpu_milli=2000, memory_mib=4096, gpu_milli=500, gpu_memory_mib=12000)
    ]
    assert (
        by_id["pod:research/kai-style"].tasks[0].gpu_milli,
        by_id["pod:research/kai-style"].tasks[0].gpu_memory_mib,
    ) == (250, 4096)
    assert by_id["pod:research/two"].tasks[0].gpus == 2
    assert by_id["pod:research/two"].priority == 10


def test_pods_of_one_gang_form_one_job_and_bad_annotations_are_explained(emu: Emulator) -> None:
    kubectl_apply(emu, "w0", {c.ANN_GANG: "ddp", c.ANN_GPUS: "1"})
    kubectl_apply(emu, "w1", {c.ANN_GANG: "ddp", c.ANN_GPUS: "1"})
    kubectl_apply(emu, "greedy", {c.ANN_GPU_MILLI: "1500"})
    kubectl_apply(emu, "typo", {c.ANN_GPU_MILLI: "half"})

    jobs, invalid = make_backend(emu).outside_jobs()

    assert [(j.job_id, [t.task_id for t in j.tasks]) for j in jobs] == [
        ("gang:research/ddp", ["research/w0", "research/w1"])
    ]
    assert "below 1000 milli-GPU" in invalid["pod:research/greedy"]
    assert "invalid GPU annotation" in invalid["pod:research/typo"]


def test_outside_pods_are_annotated_bound_and_then_counted_in_the_snapshot(emu: Emulator) -> None:
    bindings = serve_bindings(emu)
    kubectl_apply(emu, "half", {c.ANN_GPU_MILLI: "500", c.ANN_GPU_MEMORY_MIB: "12000"})
    backend = make_backend(emu)
    jobs, _ = backend.outside_jobs()
    profile = Profile(name="first_fit", filters=("resource_fit",), scores={}, gpu_chooser="first_fit_gpus")

    decision = schedule(backend.snapshot(), jobs, profile)
    backend.bind_outside(decision.placements)

    assert bindings == [("research", "half", "gpu-1")]
    annotations = stored(emu, PODS, "research", "half")["metadata"]["annotations"]
    assert annotations[c.ANN_VISIBLE_DEVICES] == "GPU-0"
    assert annotations[c.ANN_GPU_MILLI] == "500"
    snapshot = make_backend(emu).snapshot()
    assert [(p.job_id, p.gpu_milli) for p in snapshot.running] == [("pod:research/half", 500)]
    assert snapshot.node("gpu-1").gpus[0].used_milli == 500
    assert make_backend(emu).outside_jobs() == ([], {})

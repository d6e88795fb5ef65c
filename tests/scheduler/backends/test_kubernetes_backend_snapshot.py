"""The snapshot comes from Nodes and pod annotations, so a restarted scheduler loses nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest

from scheduler.backends.base import TaskSpec
from scheduler.backends.kubernetes import KubernetesBackend
from scheduler.backends.kubernetes import contract as c
from scheduler.engine.schedule import schedule
from scheduler.framework import Profile
from scheduler.model import JobRequest, Placement, TaskRequest
from tests.scheduler.backends.kube_emulator import (
    NODES,
    PODS,
    Emulator,
    add_node,
    running_emulator,
    serve_bindings,
    stored,
)

NS = "gpu-jobs"
GPUS = json.dumps([{"index": i, "uuid": f"GPU-{i}", "model": "L40S", "memory_mib": 46068} for i in range(4)])


@pytest.fixture()
def emu() -> Iterator[Emulator]:
    with running_emulator() as emulator:
        add_node(emulator, "gpu-1", cpu="64", memory="512Gi", annotations={c.NODE_ANN_GPUS: GPUS})
        add_node(emulator, "gpu-2", cpu="64", memory="512Gi", annotations={c.NODE_ANN_GPUS: GPUS})
        serve_bindings(emulator)
        yield emulator


def make_backend(emu: Emulator) -> KubernetesBackend:
    return KubernetesBackend(
        emu.api_client(), namespace=NS, scheduler_name="s", sleep=lambda s: None, watch_timeout_s=0.2
    )


def outside_pod(
    name: str, node: str, cpu: str, phase: str = "Running", namespace: str = "kube-system"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
            ],
        },
        "status": {"phase": phase},
    }


def test_a_restarted_backend_rebuilds_every_allocation_from_pod_annotations(emu: Emulator) -> None:
    first = make_backend(emu)
    placements = [
        Placement(
            "a", "a-0", "gpu-1", (0,), gpu_milli=250, gpu_memory_mib=8000, cpu_milli=2000, memory_mib=8192
        ),
        Placement(
            "b", "b-0", "gpu-1", (0,), gpu_milli=500, gpu_memory_mib=16000, cpu_milli=4000, memory_mib=16384
        ),
        Placement(
            "c",
            "c-0",
            "gpu-2",
            (2, 3),
            gpu_milli=1000,
            gpu_memory_mib=46068,
            cpu_milli=8000,
            memory_mib=65536,
        ),
    ]
    for placement in placements:
        first.bind(TaskSpec(job_id=placement.job_id, task_id=placement.task_id, image="img"), placement)
    api = kubernetes.client.CoreV1Api(emu.api_client())
    api.create_namespaced_pod("kube-system", outside_pod("dcgm-exporter", "gpu-1", "500m"))
    api.create_namespaced_pod(
        "default", outside_pod("old-batch", "gpu-1", "16", phase="Succeeded", namespace="default")
    )

    snapshot = make_backend(emu).snapshot()  # a new process: nothing in memory

    def key(p: Placement) -> tuple[Any, ...]:
        return (
            p.job_id,
            p.task_id,
            p.node,
            p.gpu_indices,
            p.gpu_milli,
            p.gpu_memory_mib,
            p.cpu_milli,
            p.memory_mib,
        )

    assert sorted(map(key, snapshot.running)) == sorted(map(key, placements))
    gpu1, gpu2 = snapshot.node("gpu-1"), snapshot.node("gpu-2")
    assert (gpu1.gpus[0].used_milli, gpu1.gpus[0].used_memory_mib) == (750, 24000)
    assert sorted(gpu1.gpus[0].tenants) == ["a-0", "b-0"]
    assert gpu1.used_cpu_milli == 2000 + 4000 + 500  # the finished pod holds nothing
    assert [g.used_milli for g in gpu2.gpus] == [0, 0, 1000, 1000]
    assert gpu2.used_memory_mib == 65536


def test_a_scheduled_job_is_bound_where_the_scheduler_chose(emu: Emulator) -> None:
    backend = make_backend(emu)
    backend.bind(
        TaskSpec(job_id="busy", task_id="busy-0", image="img"),
        Placement(
            "busy",
            "busy-0",
            "gpu-1",
            (0, 1, 2),
            gpu_milli=1000,
            gpu_memory_mib=46068,
            cpu_milli=1000,
            memory_mib=1024,
        ),
    )
    job = JobRequest("new", [TaskRequest("new-0", cpu_milli=1000, memory_mib=2048, gpus=2)])
    profile = Profile(name="first_fit", filters=("resource_fit",), scores={}, gpu_chooser="first_fit_gpus")

    decision = schedule(backend.snapshot(), [job], profile)
    (placement,) = decision.placements
    backend.bind(TaskSpec(job_id="new", task_id="new-0", image="img"), placement)

    assert placement.node == "gpu-2"  # gpu-1 has one GPU left
    pod = stored(emu, PODS, NS, c.pod_name("new", "new-0"))
    assert pod["spec"]["nodeName"] == placement.node
    assert pod["metadata"]["annotations"][c.ANN_GPU_INDICES] == ",".join(map(str, placement.gpu_indices))
    again = schedule(
        make_backend(emu).snapshot(), [JobRequest("third", [TaskRequest("third-0", gpus=4)])], profile
    )
    assert again.placements == [] and "third" in again.unschedulable


def test_without_the_agent_gpus_come_from_the_device_plugin_and_feature_discovery(emu: Emulator) -> None:
    add_node(
        emu,
        "plain",
        labels={c.GFD_PRODUCT: "Tesla-T4", c.GFD_MEMORY: "15360"},
        capacity={"nvidia.com/gpu": "2"},
    )

    node = make_backend(emu).snapshot().node("plain")

    assert [(g.index, g.model, g.memory_mib, g.uuid) for g in node.gpus] == [
        (0, "Tesla-T4", 15360, ""),
        (1, "Tesla-T4", 15360, ""),
    ]
    assert node.topology is None


def test_cordoned_and_not_ready_nodes_are_not_schedulable(emu: Emulator) -> None:
    add_node(emu, "cordoned")
    emu.handler.objects[NODES, None, "cordoned"].patch({"spec": {"unschedulable": True}})
    add_node(emu, "down")
    emu.handler.objects[NODES, None, "down"].patch(
        {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    )

    snapshot = make_backend(emu).snapshot()

    assert {n.name: n.schedulable for n in snapshot.nodes} == {
        "gpu-1": True,
        "gpu-2": True,
        "cordoned": False,
        "down": False,
    }


def test_gpus_taken_through_the_device_plugin_by_pods_we_did_not_place_are_not_offered_again(
    emu: Emulator,
) -> None:
    pod = outside_pod("legacy-train", "gpu-2", "1", namespace="default")
    pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "2"}
    kubernetes.client.CoreV1Api(emu.api_client()).create_namespaced_pod("default", pod)

    node = make_backend(emu).snapshot().node("gpu-2")

    assert sum(g.used_milli for g in node.gpus) == 2000
    assert sum(1 for g in node.gpus if g.tenants == ["default/legacy-train"]) == 2
    assert node.used_cpu_milli == 1000


def test_gpu_utilisation_published_by_the_agent_reaches_the_snapshot() -> None:
    readings = [
        {"index": 0, "uuid": "GPU-0", "model": "L40S", "memory_mib": 46068, "utilization_pct": 87},
        {"index": 1, "uuid": "GPU-1", "model": "L40S", "memory_mib": 46068, "utilization_pct": "high"},
    ]
    with running_emulator() as emulator:
        add_node(
            emulator, "gpu-u", cpu="8", memory="64Gi", annotations={c.NODE_ANN_GPUS: json.dumps(readings)}
        )
        gpus = make_backend(emulator).snapshot().node("gpu-u").gpus
    assert [g.utilization_pct for g in gpus] == [87.0, None]

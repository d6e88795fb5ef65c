"""Binding jobs through the Kubernetes API (kmock over real HTTP, official client unmodified)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import kmock
import pytest

from scheduler.backends.base import (
    PermanentBackendError,
    PlacementConflictError,
    TaskSpec,
    TransientBackendError,
)
from scheduler.backends.kubernetes import KubernetesBackend
from scheduler.backends.kubernetes import contract as c
from scheduler.model import Placement
from tests.scheduler.backends.kube_emulator import (
    PODS,
    SERVICES,
    Emulator,
    add_node,
    fail_next,
    running_emulator,
    serve_bindings,
    stored,
)

NS = "gpu-jobs"
SCHED = "gpu-platform-scheduler"
GPUS = json.dumps(
    [{"index": i, "uuid": f"GPU-{i:04d}", "model": "A100-SXM4-80GB", "memory_mib": 81920} for i in range(4)]
)


@pytest.fixture()
def emu() -> Iterator[Emulator]:
    with running_emulator() as emulator:
        add_node(emulator, "gpu-1", annotations={c.NODE_ANN_GPUS: GPUS})
        add_node(emulator, "gpu-2", annotations={c.NODE_ANN_GPUS: GPUS})
        yield emulator


def make_backend(emu: Emulator) -> KubernetesBackend:
    return KubernetesBackend(
        emu.api_client(), namespace=NS, scheduler_name=SCHED, sleep=lambda s: None, watch_timeout_s=0.2
    )


def env_of(pod: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}


def test_a_shared_gpu_task_becomes_a_pod_bound_to_the_chosen_node_with_its_gpu_share(emu: Emulator) -> None:
    bindings = serve_bindings(emu)
    backend = make_backend(emu)
    spec = TaskSpec(
        job_id="j1", task_id="j1-0", image="pytorch:2.4", command=["python", "train.py"], max_runtime_s=600
    )
    placement = Placement(
        "j1", "j1-0", "gpu-2", (3,), gpu_milli=250, gpu_memory_mib=8192, cpu_milli=4000, memory_mib=16384
    )

    backend.bind(spec, placement)

    pod = stored(emu, PODS, NS, c.pod_name("j1", "j1-0"))
    assert bindings == [(NS, pod["metadata"]["name"], "gpu-2")]
    assert pod["spec"]["nodeName"] == "gpu-2"
    assert pod["spec"]["schedulerName"] == SCHED
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["activeDeadlineSeconds"] == 600
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    container = pod["spec"]["containers"][0]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["resources"]["requests"] == {"cpu": "4000m", "memory": "16384Mi"}
    assert container["resources"]["limits"] == container["resources"]["requests"]
    env = env_of(pod)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "GPU-0003"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=8192M"
    assert "MASTER_ADDR" not in env
    annotations = pod["metadata"]["annotations"]
    assert annotations[c.ANN_GPU_INDICES] == "3"
    assert annotations[c.ANN_GPU_MILLI] == "250"
    assert annotations[c.ANN_GPU_MEMORY_MIB] == "8192"
    assert pod["metadata"]["labels"][c.LABEL_JOB] == "j1"


def test_a_distributed_job_is_bound_only_when_every_rank_exists_and_gets_a_headless_service(
    emu: Emulator,
) -> None:
    bindings = serve_bindings(emu)
    backend = make_backend(emu)
    specs = [TaskSpec(job_id="ddp", task_id=f"ddp-{r}", rank=r, world_size=2, image="img") for r in range(2)]
    placements = [
        Placement("ddp", "ddp-0", "gpu-1", (0, 1), gpu_milli=1000, gpu_memory_mib=81920),
        Placement("ddp", "ddp-1", "gpu-2", (2, 3), gpu_milli=1000, gpu_memory_mib=81920),
    ]

    backend.bind(specs[0], placements[0])
    assert bindings == []  # rank 0 waits for its gang
    backend.bind(specs[1], placements[1])

    assert sorted(b[1:] for b in bindings) == [
        (c.pod_name("ddp", "ddp-0"), "gpu-1"),
        (c.pod_name("ddp", "ddp-1"), "gpu-2"),
    ]
    service = stored(emu, SERVICES, NS, c.service_name("ddp"))
    assert service["spec"]["clusterIP"] == "None"
    rank1 = stored(emu, PODS, NS, c.pod_name("ddp", "ddp-1"))
    env = env_of(rank1)
    assert env["MASTER_ADDR"] == f"rank-0.{c.service_name('ddp')}.{NS}.svc"
    assert (env["WORLD_SIZE"], env["RANK"], env["LOCAL_RANK"], env["MASTER_PORT"]) == ("2", "1", "0", "29500")
    assert env["NVIDIA_VISIBLE_DEVICES"] == "GPU-0002,GPU-0003"
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env
    assert rank1["spec"]["subdomain"] == c.service_name("ddp")
    assert rank1["spec"]["hostname"] == "rank-1"


def test_bind_job_creates_every_pod_before_binding_any(emu: Emulator) -> None:
    bindings = serve_bindings(emu)
    backend = make_backend(emu)
    specs = [TaskSpec(job_id="g", task_id=f"g-{r}", rank=r, world_size=3, image="img") for r in range(3)]
    placements = [Placement("g", f"g-{r}", "gpu-1", (r,), gpu_milli=1000) for r in range(3)]

    backend.bind_job(specs, placements)

    requests = [r for r in emu.handler[kmock.method.POST] if r.resource == PODS]
    kinds = ["bind" if r.subresource == "binding" else "create" for r in requests]
    assert kinds == ["create"] * 3 + ["bind"] * 3
    assert sorted(b[2] for b in bindings) == ["gpu-1"] * 3


def test_a_repeated_bind_is_answered_409_and_treated_as_done(emu: Emulator) -> None:
    spec = TaskSpec(job_id="j2", task_id="j2-0", image="img")
    placement = Placement("j2", "j2-0", "gpu-1", (0,), gpu_milli=1000)
    name = c.pod_name("j2", "j2-0")
    # First attempt: the pod is created, then the worker loses the API server before binding.
    fail_next(emu, kmock.subresource("binding"), times=5, status=503)
    with pytest.raises(TransientBackendError):
        make_backend(emu).bind(spec, placement)
    assert "nodeName" not in stored(emu, PODS, NS, name)["spec"]
    bindings = serve_bindings(emu)

    make_backend(emu).bind(spec, placement)  # the retried Celery task, in a fresh worker
    make_backend(emu).bind(spec, placement)  # and a duplicate delivery of it

    creates = [r for r in emu.handler[kmock.method.POST] if r.resource == PODS and r.subresource is None]
    assert len(creates) == 3
    assert bindings == [(NS, name, "gpu-1")]
    assert stored(emu, PODS, NS, name)["spec"]["nodeName"] == "gpu-1"


def test_a_task_already_placed_elsewhere_is_refused_as_a_placement_conflict_not_moved(
    emu: Emulator,
) -> None:
    serve_bindings(emu)
    spec = TaskSpec(job_id="j4", task_id="j4-0", image="img")
    make_backend(emu).bind(spec, Placement("j4", "j4-0", "gpu-1", (0,), gpu_milli=1000))

    with pytest.raises(PlacementConflictError, match="already exists on gpu-1"):
        make_backend(emu).bind(spec, Placement("j4", "j4-0", "gpu-2", (1,), gpu_milli=1000))
    assert stored(emu, PODS, NS, c.pod_name("j4", "j4-0"))["spec"]["nodeName"] == "gpu-1"


def test_a_placement_on_a_node_that_is_gone_is_a_placement_conflict(emu: Emulator) -> None:
    serve_bindings(emu)

    with pytest.raises(PlacementConflictError, match="'gpu-9' no longer exists"):
        make_backend(emu).bind(
            TaskSpec(job_id="j6", task_id="j6-0", image="img"),
            Placement("j6", "j6-0", "gpu-9", (0,), gpu_milli=1000),
        )


def test_a_binding_answered_409_by_the_server_counts_as_done(emu: Emulator) -> None:
    def conflict(request: kmock.Request) -> None:
        raise kmock.KubernetesError(
            status=409, reason="Conflict", message="pod is already assigned to node gpu-1"
        )

    emu.handler["post", kmock.subresource("binding")] << conflict
    backend = make_backend(emu)

    backend.bind(
        TaskSpec(job_id="j3", task_id="j3-0", image="img"),
        Placement("j3", "j3-0", "gpu-1", (1,), gpu_milli=1000),
    )

    assert len(list(emu.handler[kmock.subresource("binding")])) == 1


def test_a_gang_whose_binding_is_refused_is_deleted_entirely(emu: Emulator) -> None:
    bound: list[str] = []

    def refuse_second(request: kmock.Request) -> dict:
        if bound:
            raise kmock.KubernetesError(status=422, reason="Invalid", message="node gpu-9 not found")
        bound.append(request.name)
        emu.handler.objects[PODS, request.namespace, request.name].patch({"spec": {"nodeName": "gpu-1"}})
        return {"kind": "Status", "status": "Success"}

    emu.handler["post", kmock.subresource("binding")] << refuse_second
    backend = make_backend(emu)
    specs = [TaskSpec(job_id="g2", task_id=f"g2-{r}", rank=r, world_size=2, image="img") for r in range(2)]
    placements = [Placement("g2", f"g2-{r}", "gpu-1", (r,), gpu_milli=1000) for r in range(2)]

    with pytest.raises(PermanentBackendError, match="422"):
        backend.bind_job(specs, placements)

    live = [key for key, obj in emu.handler.objects.items() if key[0] in (PODS, SERVICES) and not obj.deleted]
    assert live == []
    assert len(list(emu.handler[kmock.method.DELETE])) == 3  # two pods and the Service

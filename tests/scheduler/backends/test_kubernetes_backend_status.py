"""Pod phases drive TaskStatus through a resumable watch (kmock over real HTTP)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kmock
import kubernetes.client
import pytest

from scheduler.backends.base import TaskPhase, TaskSpec
from scheduler.backends.kubernetes import KubernetesBackend
from scheduler.backends.kubernetes import contract as c
from scheduler.model import Placement
from tests.scheduler.backends.kube_emulator import (
    PODS,
    SERVICES,
    Emulator,
    add_node,
    running_emulator,
    serve_bindings,
)

NS = "gpu-jobs"


@pytest.fixture()
def emu() -> Iterator[Emulator]:
    with running_emulator() as emulator:
        add_node(emulator, "gpu-1", capacity={"nvidia.com/gpu": "2"})
        serve_bindings(emulator)
        yield emulator


def make_backend(emu: Emulator) -> KubernetesBackend:
    return KubernetesBackend(
        emu.api_client(), namespace=NS, scheduler_name="s", sleep=lambda s: None, watch_timeout_s=0.2
    )


def start_task(backend: KubernetesBackend, job: str = "j1") -> str:
    backend.bind(
        TaskSpec(job_id=job, task_id=f"{job}-0", image="img"),
        Placement(job, f"{job}-0", "gpu-1", (1,), gpu_milli=1000),
    )
    return c.pod_name(job, f"{job}-0")


def set_status(emu: Emulator, name: str, status: dict[str, Any], **metadata: Any) -> None:
    """What the kubelet does: patch the pod's status subresource."""
    api = kubernetes.client.CoreV1Api(emu.api_client())
    body: dict[str, Any] = {"status": status}
    if metadata:
        body["metadata"] = metadata
    api.patch_namespaced_pod_status(name, NS, body)


def container(state: dict[str, Any]) -> dict[str, Any]:
    """A containerStatuses item with the fields the API server always sends."""
    return {"name": "main", "image": "img", "imageID": "", "ready": False, "restartCount": 0, "state": state}


def terminated(exit_code: int, reason: str = "") -> dict[str, Any]:
    return container(
        {"terminated": {"exitCode": exit_code, "reason": reason, "finishedAt": "2026-01-01T10:00:00Z"}}
    )


def test_pod_phases_drive_the_task_from_starting_to_running_to_succeeded(emu: Emulator) -> None:
    backend = make_backend(emu)
    name = start_task(backend)

    assert [(s.task_id, s.phase, s.node, s.gpu_indices) for s in backend.task_statuses()] == [
        ("j1-0", TaskPhase.STARTING, "gpu-1", (1,))
    ]
    set_status(emu, name, {"phase": "Running", "startTime": "2026-01-01T09:00:00Z"})
    running = backend.task_statuses("j1")[0]
    assert running.phase is TaskPhase.RUNNING
    assert running.started_at == 1767258000.0
    set_status(emu, name, {"phase": "Succeeded", "containerStatuses": [terminated(0)]})
    done = backend.task_statuses("j1")[0]
    assert (done.phase, done.exit_code, done.failure_category) == (TaskPhase.SUCCEEDED, 0, "")
    assert done.finished_at == 1767261600.0


@pytest.mark.parametrize(
    ("status", "category", "exit_code"),
    [
        ({"phase": "Failed", "containerStatuses": [terminated(137, "OOMKilled")]}, "OOM", 137),
        ({"phase": "Failed", "containerStatuses": [terminated(3, "Error")]}, "USER", 3),
        (
            {"phase": "Failed", "reason": "DeadlineExceeded", "message": "Pod was active too long"},
            "TIMEOUT",
            None,
        ),
        (
            {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."},
            "PLATFORM",
            None,
        ),
        ({"phase": "Failed", "reason": "NodeLost", "message": "node gpu-1 is unreachable"}, "HARDWARE", None),
        ({"phase": "Unknown"}, "HARDWARE", None),
        (
            {
                "phase": "Pending",
                "containerStatuses": [container({"waiting": {"reason": "ImagePullBackOff"}})],
            },
            "IMAGE",
            None,
        ),
        (
            {
                "phase": "Failed",
                "conditions": [
                    {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
                ],
                "containerStatuses": [terminated(143, "Error")],
            },
            "PLATFORM",
            143,
        ),
    ],
    ids=["oom", "user-exit", "deadline", "evicted", "node-lost", "unknown-phase", "image-pull", "preempted"],
)
def test_a_failed_pod_fails_its_task_with_the_right_category(
    emu: Emulator, status: dict[str, Any], category: str, exit_code: int | None
) -> None:
    backend = make_backend(emu)
    name = start_task(backend)
    backend.task_statuses()

    set_status(emu, name, status)
    result = backend.task_statuses("j1")[0]

    assert (result.phase, result.failure_category, result.exit_code) == (
        TaskPhase.FAILED,
        category,
        exit_code,
    )
    assert result.message


def test_the_watch_resumes_from_the_last_resource_version_it_saw(emu: Emulator) -> None:
    backend = make_backend(emu)
    name = start_task(backend)
    backend.task_statuses()  # a fresh backend lists
    backend.task_statuses()  # and then watches
    set_status(emu, name, {"phase": "Running"}, resourceVersion="4711")
    assert backend.task_statuses()[0].phase is TaskPhase.RUNNING  # the event carrying 4711

    backend.task_statuses()

    watches = list(emu.handler[kmock.action.WATCH])
    assert watches[-1].params.get("resourceVersion") == "4711"
    assert backend.relists == 1


def test_a_410_gone_on_the_watch_makes_the_backend_relist(emu: Emulator) -> None:
    backend = make_backend(emu)
    name = start_task(backend)
    backend.task_statuses()
    gone = {
        "type": "ERROR",
        "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"},
    }
    served = [0]

    def expire(request: kmock.Request) -> bytes:
        if served[0]:
            raise kmock.ReactionMismatchError
        served[0] += 1
        return json.dumps(gone).encode() + b"\n"

    emu.handler[kmock.action.WATCH] << expire
    set_status(emu, name, {"phase": "Succeeded", "containerStatuses": [terminated(0)]})

    statuses = backend.task_statuses()

    assert served == [1]
    assert backend.relists == 2
    assert [s.phase for s in statuses] == [TaskPhase.SUCCEEDED]


def test_a_pod_deleted_behind_the_platforms_back_fails_its_task_at_the_next_resync(emu: Emulator) -> None:
    now = [1000.0]
    backend = KubernetesBackend(
        emu.api_client(),
        namespace=NS,
        scheduler_name="s",
        sleep=lambda s: None,
        watch_timeout_s=0.2,
        resync_s=60,
        clock=lambda: now[0],
    )
    name = start_task(backend)
    set_status(emu, name, {"phase": "Running"})
    assert backend.task_statuses()[0].phase is TaskPhase.RUNNING

    kubernetes.client.CoreV1Api(emu.api_client()).delete_namespaced_pod(name, NS)
    now[0] += 61
    status = backend.task_statuses()[0]

    assert (status.task_id, status.phase, status.failure_category) == ("j1-0", TaskPhase.FAILED, "PLATFORM")
    assert backend.relists == 2


def test_cancel_deletes_the_jobs_pods_and_service_and_forgets_them(emu: Emulator) -> None:
    backend = make_backend(emu)
    specs = [TaskSpec(job_id="d", task_id=f"d-{r}", rank=r, world_size=2, image="img") for r in range(2)]
    # Half of GPU 0 each: GPU 1 stays free for the job that must survive (bind re-checks capacity).
    backend.bind_job(specs, [Placement("d", f"d-{r}", "gpu-1", (0,), gpu_milli=500) for r in range(2)])
    other = start_task(backend, "keep")
    assert len(backend.task_statuses()) == 3

    backend.delete_job("d")
    backend.delete_job("d")  # idempotent

    live = sorted(
        key[2] for key, obj in emu.handler.objects.items() if key[0] in (PODS, SERVICES) and not obj.deleted
    )
    assert live == [other]
    assert [s.job_id for s in backend.task_statuses()] == ["keep"]


def test_logs_come_from_the_pod_log_api_and_are_empty_before_the_pod_exists(emu: Emulator) -> None:
    backend = make_backend(emu)
    name = start_task(backend)
    (
        emu.handler["get", kmock.subresource("log"), kmock.name(name)]
        << b"epoch 1 loss 0.93\nepoch 2 loss 0.71\n"
    )

    assert backend.logs("j1", "j1-0") == "epoch 1 loss 0.93\nepoch 2 loss 0.71\n"
    assert backend.logs("nope", "nope-0") == ""
    log_request = list(emu.handler[kmock.subresource("log")])[0]
    assert log_request.params.get("container") == "main"

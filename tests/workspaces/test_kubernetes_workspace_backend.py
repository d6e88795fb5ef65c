"""On Kubernetes (kmock over real HTTP, the official client unmodified) a workspace's pod gets a
ClusterIP Service on its declared port; the proxy's target is that Service while the pod runs; the
Service goes with the job. A batch job gets none."""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes
import pytest

from scheduler.backends.base import TaskSpec
from scheduler.model import Placement
from tests.scheduler.backends.kube_emulator import (
    SERVICES,
    Emulator,
    add_node,
    running_emulator,
    serve_bindings,
)
from tests.scheduler.backends.test_kubernetes_backend_bind import GPUS, NS, make_backend

pytest.importorskip("kmock", reason="kmock is a dev dependency")


@pytest.fixture()
def emu() -> Iterator[Emulator]:
    from scheduler.backends.kubernetes import contract as c

    with running_emulator() as emulator:
        add_node(emulator, "gpu-1", annotations={c.NODE_ANN_GPUS: GPUS})
        yield emulator


def _bind(emu: Emulator, job: str, env: dict[str, str]) -> str:
    from scheduler.backends.kubernetes import contract as c

    serve_bindings(emu)
    backend = make_backend(emu)
    spec = TaskSpec(job_id=job, task_id=f"{job}-0", image="jupyter", command=["jupyter", "lab"], env=env)
    backend.bind(
        spec, Placement(job, f"{job}-0", "gpu-1", (0,), gpu_milli=250, cpu_milli=500, memory_mib=1024)
    )
    return c.pod_name(job, f"{job}-0")


def _running(emu: Emulator, pod: str) -> None:
    kubernetes.client.CoreV1Api(emu.api_client()).patch_namespaced_pod_status(
        pod, NS, {"status": {"phase": "Running"}}
    )


def test_a_workspace_pod_gets_a_service_the_proxy_reaches_while_it_runs(emu: Emulator) -> None:
    pod = _bind(emu, "41", {"GPU_PLATFORM_WORKSPACE_PORT": "8888"})
    backend = make_backend(emu)
    service = dict(emu.handler.objects[SERVICES, NS, "ws-41"].raw)

    assert service["spec"]["ports"][0]["port"] == 8888
    assert service["spec"]["selector"]["gpu-platform.io/job"] == "41"
    assert backend.workspace_target("41") is None  # not running yet
    _running(emu, pod)
    assert backend.workspace_target("41") == f"http://ws-41.{NS}.svc:8888"

    backend.delete_job("41")
    assert emu.handler.objects[SERVICES, NS, "ws-41"].deleted


def test_a_batch_job_gets_no_workspace_service(emu: Emulator) -> None:
    pod = _bind(emu, "42", {})
    _running(emu, pod)

    assert (SERVICES, NS, "ws-42") not in emu.handler.objects
    assert make_backend(emu).workspace_target("42") is None

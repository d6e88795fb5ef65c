"""After the cycle, pods submitted with our schedulerName outside the portal are placed and bound, on
what the platform's own jobs (bound or only decided) leave free (kmock over real HTTP)."""

# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest

from jobs import outside_pods, scheduling
from jobs.models import Job
from jobs.states import JobStatus
from scheduler.backends.kubernetes import KubernetesBackend
from scheduler.backends.kubernetes import contract as c
from tests.jobs.runtime_fixtures import image, researcher, submit, team  # noqa: F401  (fixtures)
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


@pytest.fixture()
def kube(emu: Emulator, settings: Any) -> KubernetesBackend:
    settings.SCHEDULER_POLICY = "fifo"
    return KubernetesBackend(
        emu.api_client(), namespace="gpu-jobs", scheduler_name=SCHED, sleep=lambda s: None
    )


def kubectl_apply(emu: Emulator, name: str, annotations: dict[str, str]) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "research", "annotations": annotations},
        "spec": {
            "schedulerName": SCHED,
            "containers": [{"name": "nb", "image": "jupyter", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Pending"},
    }
    kubernetes.client.CoreV1Api(emu.api_client()).create_namespaced_pod("research", body)


def test_a_pending_outside_pod_is_bound_after_the_cycle(transactional_db: Any, emu: Emulator, kube) -> None:
    bindings = serve_bindings(emu)
    kubectl_apply(emu, "notebook", {c.ANN_GPUS: "1"})

    result = outside_pods.schedule_outside_pods(backend=kube)

    assert result is not None and result.bound == ["pod:research/notebook"]
    assert bindings == [("research", "notebook", "gpu-1")]
    assert stored(emu, PODS, "research", "notebook")["metadata"]["annotations"][c.ANN_VISIBLE_DEVICES]


def test_gpus_the_cycle_decided_for_a_platform_job_are_not_given_to_an_outside_pod(
    transactional_db: Any, emu: Emulator, kube, researcher, image
) -> None:
    bindings = serve_bindings(emu)
    job = submit(researcher, image, gpus=2)
    scheduling.run_scheduling_cycle(backend=kube)
    assert Job.objects.get(pk=job.pk).status == JobStatus.ADMITTED.value  # decided, its pods not yet made
    kubectl_apply(emu, "notebook", {c.ANN_GPUS: "1"})

    result = outside_pods.schedule_outside_pods(backend=kube)

    assert result is not None and result.bound == []
    assert "pod:research/notebook" in result.waiting
    assert bindings == []


def test_pods_with_bad_annotations_stay_pending_with_the_reason(
    transactional_db: Any, emu: Emulator, kube
) -> None:
    bindings = serve_bindings(emu)
    kubectl_apply(emu, "broken", {c.ANN_GPU_MILLI: "lots"})

    result = outside_pods.schedule_outside_pods(backend=kube)

    assert result is not None and list(result.invalid) == ["pod:research/broken"]
    assert bindings == []


def test_a_backend_without_outside_pods_has_nothing_to_do(db: Any, tmp_path, settings) -> None:
    from scheduler.backends.simulated import SimulatedBackend

    assert (
        outside_pods.schedule_outside_pods(backend=SimulatedBackend(state_path=tmp_path / "s.json")) is None
    )

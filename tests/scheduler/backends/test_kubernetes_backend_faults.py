"""Faults a real API server produces: 5xx, 429, timeouts, 403 (kmock over real HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import kmock
import pytest

from scheduler.backends.base import PermanentBackendError, TaskSpec, TransientBackendError
from scheduler.backends.kubernetes import KubernetesBackend, create_kubernetes_backend
from scheduler.model import Placement
from tests.scheduler.backends.kube_emulator import (
    NODES,
    PODS,
    Emulator,
    add_node,
    fail_next,
    running_emulator,
    serve_bindings,
)

NS = "gpu-jobs"


@pytest.fixture()
def emu() -> Iterator[Emulator]:
    with running_emulator() as emulator:
        add_node(emulator, "gpu-1", capacity={"nvidia.com/gpu": "4"})
        yield emulator


def make_backend(emu: Emulator, sleeps: list[float], **options: float) -> KubernetesBackend:
    return KubernetesBackend(
        emu.api_client(retries=False),
        namespace=NS,
        scheduler_name="s",
        sleep=sleeps.append,
        watch_timeout_s=0.2,
        **options,
    )


def test_a_500_on_pod_creation_is_retried_and_the_409_of_the_repeat_counts_as_done(emu: Emulator) -> None:
    bindings = serve_bindings(emu)
    # The emulator stores the pod and then answers 500, like an API server whose reply got lost.
    failures = fail_next(emu, (kmock.method.POST, PODS), times=1, status=500)
    sleeps: list[float] = []

    make_backend(emu, sleeps).bind(
        TaskSpec(job_id="j", task_id="j-0", image="img"), Placement("j", "j-0", "gpu-1", (0,), gpu_milli=1000)
    )

    creates = [r for r in emu.handler[kmock.method.POST] if r.resource == PODS and r.subresource is None]
    assert failures == [1]
    assert len(creates) == 2
    assert len(sleeps) == 1
    assert [b[2] for b in bindings] == ["gpu-1"]


def test_a_429_is_retried_with_growing_backoff(emu: Emulator) -> None:
    failures = fail_next(emu, NODES, times=3, status=429)
    sleeps: list[float] = []

    snapshot = make_backend(emu, sleeps, backoff_s=1.0, max_backoff_s=100.0).snapshot()

    assert failures == [3]
    assert [n.name for n in snapshot.nodes] == ["gpu-1"]
    # Jittered exponential backoff: attempt k waits within [0.5, 1] x 2^k seconds.
    assert [0.5 * 2**k <= s <= 2**k for k, s in enumerate(sleeps)] == [True, True, True]


def test_a_server_that_keeps_failing_becomes_a_transient_error_after_the_last_attempt(emu: Emulator) -> None:
    fail_next(emu, NODES, times=100, status=503)
    sleeps: list[float] = []

    with pytest.raises(TransientBackendError, match="after 4 attempts: 503"):
        make_backend(emu, sleeps, max_attempts=4).snapshot()

    assert len(sleeps) == 3


def test_a_request_that_times_out_is_retried(emu: Emulator) -> None:
    served = [0]

    async def stall(request: kmock.Request) -> None:
        if served[0]:
            raise kmock.ReactionMismatchError
        served[0] += 1
        await asyncio.sleep(2)

    emu.handler[NODES] << stall
    sleeps: list[float] = []

    snapshot = make_backend(emu, sleeps, request_timeout_s=0.3).snapshot()

    assert served == [1]
    assert len(sleeps) == 1
    assert [n.name for n in snapshot.nodes] == ["gpu-1"]


def test_403_is_a_configuration_error_that_names_the_missing_permission_and_is_not_retried(
    emu: Emulator,
) -> None:
    fail_next(emu, (kmock.method.POST, PODS), times=100, status=403)
    sleeps: list[float] = []

    with pytest.raises(PermanentBackendError) as caught:
        make_backend(emu, sleeps).bind(
            TaskSpec(job_id="j", task_id="j-0", image="img"), Placement("j", "j-0", "gpu-1", (0,))
        )

    message = str(caught.value)
    assert "403 Forbidden" in message and "create pod job-j-0" in message and "deploy/rbac.yaml" in message
    assert "\n" not in message
    assert sleeps == []


def test_an_unreachable_api_server_is_a_transient_error() -> None:
    with running_emulator() as emulator:
        client = emulator.api_client()
    sleeps: list[float] = []
    backend = KubernetesBackend(client, namespace=NS, scheduler_name="s", sleep=sleeps.append, max_attempts=2)

    with pytest.raises(TransientBackendError, match="still failing after 2 attempts"):
        backend.snapshot()
    assert len(sleeps) == 1


def test_a_missing_kubeconfig_is_one_clear_line(tmp_path: object) -> None:
    with pytest.raises(PermanentBackendError) as caught:
        create_kubernetes_backend("gpu-jobs", "s", kubeconfig="/nonexistent/kubeconfig")

    assert str(caught.value).startswith(
        "cannot load Kubernetes configuration from kubeconfig /nonexistent/kubeconfig"
    )
    assert "\n" not in str(caught.value)


def test_the_factory_builds_a_backend_from_a_kubeconfig(
    tmp_path: pytest.TempPathFactory, emu: Emulator
) -> None:
    kubeconfig = tmp_path / "config"  # type: ignore[operator]
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
        f"clusters: [{{name: emu, cluster: {{server: '{emu.url}'}}}}]\n"
        "users: [{name: u, user: {token: secret}}]\n"
        "contexts: [{name: test, context: {cluster: emu, user: u}}]\n"
    )

    backend = create_kubernetes_backend("gpu-jobs", "gpu-platform-scheduler", kubeconfig=str(kubeconfig))

    assert backend.name == "kubernetes"
    assert [n.name for n in backend.snapshot().nodes] == ["gpu-1"]
    assert list(emu.handler[NODES])[-1].headers.get("Authorization") == "Bearer secret"


def test_a_429_with_retry_after_waits_as_long_as_the_server_asks(emu: Emulator) -> None:
    emu.handler[NODES][:1] << 429 << kmock.headers({"Retry-After": "7"}) << {"kind": "Status", "code": 429}
    sleeps: list[float] = []

    snapshot = make_backend(emu, sleeps, backoff_s=0.5, max_backoff_s=30.0).snapshot()

    assert sleeps == [7.0]
    assert [n.name for n in snapshot.nodes] == ["gpu-1"]

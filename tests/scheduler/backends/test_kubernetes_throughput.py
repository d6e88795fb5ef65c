"""A running pod reports its throughput with the contract's log line, read from the pod log API."""

from __future__ import annotations

from collections.abc import Iterator

import kmock
import kubernetes.client
import pytest

from scheduler.backends.base import TaskPhase, TaskSpec
from scheduler.backends.kubernetes import KubernetesBackend
from scheduler.backends.kubernetes import contract as c
from scheduler.model import Placement
from tests.scheduler.backends.kube_emulator import Emulator, add_node, running_emulator, serve_bindings

NS = "gpu-jobs"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def emu() -> Iterator[Emulator]:
    with running_emulator() as emulator:
        add_node(emulator, "gpu-1", capacity={"nvidia.com/gpu": "2"})
        serve_bindings(emulator)
        yield emulator


def running_task(emu: Emulator, clock: Clock) -> tuple[KubernetesBackend, str]:
    backend = KubernetesBackend(
        emu.api_client(),
        namespace=NS,
        scheduler_name="s",
        sleep=lambda s: None,
        watch_timeout_s=0.2,
        clock=clock,
        throughput_interval_s=30.0,
    )
    backend.bind(
        TaskSpec(job_id="j1", task_id="j1-0", image="img"), Placement("j1", "j1-0", "gpu-1", (0,), 1000)
    )
    name = c.pod_name("j1", "j1-0")
    api = kubernetes.client.CoreV1Api(emu.api_client())
    api.patch_namespaced_pod_status(name, NS, {"status": {"phase": "Running"}})
    return backend, name


def serve_log(emu: Emulator, name: str, text: bytes) -> None:
    emu.handler["get", kmock.subresource("log"), kmock.name(name)] << text


def log_reads(emu: Emulator) -> int:
    return len(list(emu.handler[kmock.subresource("log")]))


def test_the_last_progress_line_of_a_running_pod_is_its_throughput(emu: Emulator) -> None:
    backend, name = running_task(emu, Clock())
    serve_log(emu, name, b"[progress] throughput=10\nepoch 1\n[progress] throughput=12.5\nepoch 2\n")

    (status,) = backend.task_statuses("j1")
    assert (status.phase, status.throughput) == (TaskPhase.RUNNING, 12.5)
    request = list(emu.handler[kmock.subresource("log")])[0]
    assert request.params.get("container") == "main"
    assert request.params.get("tailLines") == "200"


def test_a_pod_that_prints_no_progress_line_reports_nothing(emu: Emulator) -> None:
    backend, name = running_task(emu, Clock())
    serve_log(emu, name, b"epoch 1 loss 0.93\nthroughput=5 (not the contract's line)\n")

    assert backend.task_statuses("j1")[0].throughput is None


def test_the_log_is_read_once_per_interval_and_the_value_outlives_its_line(emu: Emulator) -> None:
    clock = Clock()
    backend, name = running_task(emu, clock)
    log = [b"[progress] throughput=7\n"]
    emu.handler["get", kmock.subresource("log"), kmock.name(name)] << (lambda request: log[0])
    assert backend.task_statuses("j1")[0].throughput == 7.0

    log[0] = b"[progress] throughput=9\n"
    clock.now += 10
    assert backend.task_statuses("j1")[0].throughput == 7.0  # within the interval: not read again
    assert log_reads(emu) == 1

    clock.now += 30
    assert backend.task_statuses("j1")[0].throughput == 9.0
    log[0] = b"epoch 9: the progress line scrolled out of the tail\n"
    clock.now += 30
    assert backend.task_statuses("j1")[0].throughput == 9.0
    assert log_reads(emu) == 3

"""The node agent publishes its reading on the Node; the Kubernetes backend reads it back."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

import kmock
import kubernetes.client
import pytest
from fake_nvml import FakeNvml

from scheduler.agent.__main__ import EXIT_CONFIG, EXIT_NO_DRIVER, build_parser, run
from scheduler.backends.kubernetes import KubernetesBackend
from scheduler.backends.kubernetes import contract as c
from tests.scheduler.backends.kube_emulator import (
    NODES,
    Emulator,
    add_node,
    fail_next,
    running_emulator,
    stored,
)


@pytest.fixture()
def emu() -> Iterator[Emulator]:
    with running_emulator() as emulator:
        add_node(emulator, "dgx-a", cpu="128", memory="1Ti", labels={"kubernetes.io/hostname": "dgx-a"})
        yield emulator


def args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def api_for(emu: Emulator) -> Any:
    return lambda _args: kubernetes.client.CoreV1Api(emu.api_client())


def test_the_agent_publishes_its_gpus_as_labels_and_annotations_on_its_node(emu: Emulator) -> None:
    nvml = FakeNvml.load("nvml_dgx1_v100.json")

    code = run(args("--once", "--node-name", "dgx-a"), nvml, api_factory=api_for(emu))

    assert code == 0
    node = stored(emu, NODES, None, "dgx-a")
    labels, annotations = node["metadata"]["labels"], node["metadata"]["annotations"]
    assert labels["kubernetes.io/hostname"] == "dgx-a"  # merged, not replaced
    assert labels[c.NODE_LABEL_GPU_COUNT] == "8"
    assert labels[c.NODE_LABEL_GPU_MODEL] == "Tesla-V100-SXM2-32GB"
    assert labels[c.NODE_LABEL_DRIVER] == "535.104.05"
    assert labels[c.NODE_LABEL_CUDA] == "12.2"
    gpus = json.loads(annotations[c.NODE_ANN_GPUS])
    assert [g["uuid"] for g in gpus] == [d["uuid"] for d in nvml.recording["devices"]]
    assert gpus[1]["utilization_pct"] == 37
    assert json.loads(annotations[c.NODE_ANN_TOPOLOGY])["links"] == nvml.recording["expected_links"]
    assert nvml.shutdowns == 1


def test_nodes_published_by_the_agent_become_the_backends_snapshot(emu: Emulator) -> None:
    add_node(emu, "cpu-only", cpu="16", memory="64Gi")
    run(args("--once", "--node-name", "dgx-a"), FakeNvml.load("nvml_dgx_a100.json"), api_factory=api_for(emu))
    backend = KubernetesBackend(
        emu.api_client(), namespace="gpu-jobs", scheduler_name="s", sleep=lambda s: None
    )

    snapshot = backend.snapshot()

    dgx = snapshot.node("dgx-a")
    assert (dgx.cpu_milli, dgx.memory_mib) == (128000, 1024 * 1024)
    assert len(dgx.gpus) == 8
    assert dgx.gpu_model == "NVIDIA A100-SXM4-80GB"
    assert {g.memory_mib for g in dgx.gpus} == {81920}
    assert dgx.gpus[5].uuid.startswith("GPU-a100")
    assert (dgx.driver_version, dgx.cuda_version) == ("550.54.15", "12.4")
    assert dgx.topology is not None and dgx.topology.is_nvswitch
    assert dgx.topology.link(0, 7) == "NV12"
    assert snapshot.node("cpu-only").gpus == []
    assert snapshot.running == []


def test_a_failing_api_server_does_not_stop_the_agent_loop(emu: Emulator) -> None:
    failures = fail_next(emu, kmock.method.PATCH, times=1, status=500)
    periods: list[float] = []

    code = run(
        args("--node-name", "dgx-a", "--interval", "15"),
        FakeNvml.load("nvml_dgx_a100.json"),
        api_factory=api_for(emu),
        sleep=periods.append,
        stop=lambda: len(periods) >= 1,
    )

    assert code == 0
    assert failures == [1]
    assert periods == [15.0]
    assert stored(emu, NODES, None, "dgx-a")["metadata"]["labels"][c.NODE_LABEL_GPU_COUNT] == "8"


def test_without_an_nvidia_driver_the_agent_says_so_in_one_line_and_exits_non_zero(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = run(args("--once", "--node-name", "n"), FakeNvml.load("nvml_dgx_a100.json", driver_loaded=False))

    err = capsys.readouterr().err
    assert code == EXIT_NO_DRIVER
    assert err.strip().splitlines() == [
        "error: no NVIDIA driver available (NVML: NVML Shared Library Not Found)"
    ]


def test_the_agent_refuses_to_run_without_a_node_name(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(args("--once", "--node-name", ""), FakeNvml.load("nvml_dgx_a100.json"))

    assert code == EXIT_CONFIG
    assert "NODE_NAME" in capsys.readouterr().err


def test_a_dry_run_prints_the_node_patch_instead_of_publishing(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(args("--dry-run"), FakeNvml.load("nvml_dgx1_v100.json"))

    patch = json.loads(capsys.readouterr().out)
    assert code == 0
    assert patch["metadata"]["labels"][c.NODE_LABEL_GPU_COUNT] == "8"

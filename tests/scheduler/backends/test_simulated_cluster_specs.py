"""The simulated backend boots every shipped cluster spec (the one spec system it shares with the
simulator), and a bad cluster name is one clear line, from the constructor and from the system check."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from django.test import override_settings

from jobs.checks import check_cluster_backend
from scheduler.backends.sim_clusters import cluster_names
from scheduler.backends.simulated import SimulatedBackend
from scheduler.datapaths import default_data_dir
from scheduler.sim.cluster import ClusterSpecError, load_cluster_spec

DATA = default_data_dir()
OPENB_NODES = DATA / "alibaba-gpu-2023" / "openb_node_list_gpu_node.csv"
# Specs that need nothing from the shared data (their topology files ship with them).
SELF_CONTAINED = {"demo", "small"}


def _needs_data(name: str) -> bool:
    return name not in SELF_CONTAINED


@pytest.mark.parametrize("name", cluster_names())
def test_the_simulated_backend_boots_each_shipped_spec_with_the_simulators_nodes(
    name: str, tmp_path: Path
) -> None:
    if _needs_data(name) and not (DATA / "topologies").is_dir():
        pytest.skip(f"the shared data ({DATA}) is absent")
    spec = load_cluster_spec(name, DATA)
    sim_nodes, _ = spec.build_nodes()
    snapshot = SimulatedBackend(tmp_path / "c.json", cluster=name).snapshot()
    assert [n.name for n in snapshot.nodes] == [n.name for n in sim_nodes]
    assert sum(len(n.gpus) for n in snapshot.nodes) == spec.total_gpus
    assert [(n.cpu_milli, n.memory_mib, n.labels) for n in snapshot.nodes] == [
        (n.cpu_milli, n.memory_mib, n.labels) for n in sim_nodes
    ]


@pytest.mark.skipif(not OPENB_NODES.is_file(), reason=f"the Alibaba node list ({OPENB_NODES}) is absent")
def test_alibaba_openb_is_the_traces_gpu_nodes_read_from_the_shared_node_list(tmp_path: Path) -> None:
    with OPENB_NODES.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    nodes = SimulatedBackend(tmp_path / "c.json", cluster="alibaba-openb").snapshot().nodes
    assert len(nodes) == len(rows) == 1213
    assert [n.name for n in nodes] == [r["sn"] for r in rows]
    assert [(n.cpu_milli, len(n.gpus), n.gpu_model) for n in nodes] == [
        (int(r["cpu_milli"]), int(r["gpu"]), r["model"]) for r in rows
    ]


def test_the_demo_cluster_needs_no_shared_data(tmp_path: Path) -> None:
    empty = tmp_path / "no-data"
    empty.mkdir()
    nodes = SimulatedBackend(tmp_path / "c.json", cluster="demo", data_dir=empty).snapshot().nodes
    assert [n.name for n in nodes] == [f"dgx-{i}" for i in range(1, 5)] + [f"t4-{i}" for i in range(1, 5)]
    assert nodes[0].driver_version == "560.35.03" and nodes[0].labels["simulated"] == "true"
    assert nodes[0].topology is not None and nodes[-1].topology is not None


def test_a_node_list_spec_without_the_data_is_one_line_naming_the_file(tmp_path: Path) -> None:
    spec = tmp_path / "mine.yaml"
    spec.write_text("name: mine\nnode_list: nowhere/nodes.csv\n")
    with pytest.raises(ClusterSpecError, match=r"node_list: .*nowhere/nodes.csv: no such file") as info:
        load_cluster_spec(spec, tmp_path)
    assert "\n" not in str(info.value)


def test_a_name_format_that_gives_every_node_one_name_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "mine.yaml"
    spec.write_text(
        "name: mine\nnode_groups: [{count: 2, gpus: 1, gpu_memory_mib: 1024, name_format: same}]\n"
    )
    with pytest.raises(ClusterSpecError, match="name_format must name nodes apart"):
        load_cluster_spec(spec)


def test_an_unknown_cluster_is_one_line_naming_the_shipped_specs(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"'galaxy' not found \(shipped specs: .*alibaba-openb.*philly-256"
    ) as info:
        SimulatedBackend(tmp_path / "c.json", cluster="galaxy")
    assert "\n" not in str(info.value)


@override_settings(CLUSTER_BACKEND="simulated", SIM_CLUSTER="galaxy")
def test_the_system_check_names_an_unknown_sim_cluster() -> None:
    (error,) = [e for e in check_cluster_backend() if e.id == "jobs.E004"]
    assert "'galaxy' not found" in error.msg and "philly-512" in error.msg


@override_settings(CLUSTER_BACKEND="simulated", SIM_CLUSTER="philly-256")
def test_the_system_check_accepts_a_simulator_spec_as_sim_cluster() -> None:
    if not (DATA / "topologies").is_dir():
        pytest.skip(f"the shared data ({DATA}) is absent")
    assert [e for e in check_cluster_backend() if e.id == "jobs.E004"] == []

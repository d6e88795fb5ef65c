"""Ground-truth performance model: Gavel pairs, fallbacks, link bottlenecks, cluster specs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from scheduler.datapaths import default_data_dir
from scheduler.sim.cluster import ClusterSpecError, load_cluster_spec, parse_topology_matrix
from scheduler.sim.perf import INFEASIBLE_PAIR_NORM, best_link, bottleneck_link, comm_rate, load_perf_model

DATA = default_data_dir()
GAVEL = DATA / "interference/gavel"

DGX1 = """\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity
GPU0\t X \tNV1\tNV2\tSOC\t0-19
GPU1\tNV1\t X \tSOC\tPIX\t0-19
GPU2\tNV2\tSOC\t X \tNV1\t20-39
GPU3\tSOC\tPIX\tNV1\t X \t20-39
"""


def test_topology_matrices_parse_into_link_classes() -> None:
    links = parse_topology_matrix(DGX1)
    assert links == {(0, 1): "NV", (0, 2): "NV", (0, 3): "SYS", (1, 2): "SYS", (1, 3): "PIX", (2, 3): "NV"}


def test_the_bottleneck_of_a_gpu_set_is_the_weakest_link_needed_to_connect_it() -> None:
    links = parse_topology_matrix(DGX1)
    assert bottleneck_link(links, [0]) is None
    assert bottleneck_link(links, [0, 1, 2, 3]) == "NV"  # 1-0-2-3 is all NVLink
    assert bottleneck_link(links, [1, 3]) == "PIX"
    assert bottleneck_link(links, [1, 2]) == "SYS"
    assert best_link(links, 2, 4) == "NV" and best_link(links, 8, 4) == "NET"


def test_slower_links_never_speed_a_job_up() -> None:
    rates = [comm_rate(0.3, cls) for cls in ("NV", "PIX", "PXB", "PHB", "SYS", "NET")]
    assert rates == sorted(rates, reverse=True) and rates[0] == 1.0 and rates[-1] < 0.6


@pytest.mark.skipif(not GAVEL.is_dir(), reason=f"shared Gavel data not found: {GAVEL}")
def test_gavel_pairs_give_each_side_its_own_measured_throughput_and_fallbacks_for_the_rest() -> None:
    perf = load_perf_model(GAVEL, "k80")
    assert len(perf.job_types) == 26
    a = perf.index("ResNet-18 (batch size 16)")
    b = perf.index("ResNet-18 (batch size 32)")
    assert perf.norm(a, b) != perf.norm(b, a)
    assert perf.norm(a, b) == pytest.approx(0.529682) and perf.norm(b, a) == pytest.approx(0.43482)
    # Three on one GPU: excess slowdowns add up, s = 1 + 2 (1/y - 1).
    assert perf.shared_rate(a, [b, b]) == pytest.approx(1 / (1 + 2 * (1 / perf.norm(a, b) - 1)))
    unmeasured = [
        (i, j) for i, t in enumerate(perf.job_types) for j, u in enumerate(perf.job_types)
        if (t.name, u.name) not in perf.pair_norm
    ]  # fmt: skip
    assert unmeasured, "the shared data hold out some family pairs"
    i, _ = unmeasured[0]
    me = perf.job_types[i].name
    measured = [y for (x, _), y in perf.pair_norm.items() if x == me]
    assert perf.norm(*unmeasured[0]) == pytest.approx(math.exp(sum(map(math.log, measured)) / len(measured)))
    assert INFEASIBLE_PAIR_NORM in set(perf.pair_norm.values())


@pytest.mark.skipif(not (DATA / "topologies").is_dir(), reason=f"shared topologies not found under {DATA}")
@pytest.mark.parametrize("name", ["philly-512", "itp-a100-512", "itp-a100-32", "pollux-t4-64"])
def test_shipped_cluster_specs_load_with_their_topologies(name: str) -> None:
    spec = load_cluster_spec(name, DATA)
    nodes, links = spec.build_nodes()
    assert sum(len(n.gpus) for n in nodes) == spec.total_gpus
    assert links[0] and all(k[1] < len(nodes[0].gpus) for k in links[0])


def test_malformed_cluster_specs_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("node_groups:\n  - count: 0\n    gpus: 8\n    gpu_memory_mib: 1\n")
    with pytest.raises(ClusterSpecError, match="count must be a positive integer"):
        load_cluster_spec(bad)
    bad.write_text("gavel_gpu_type: h100\nnode_groups: [{count: 1, gpus: 1, gpu_memory_mib: 1}]\n")
    with pytest.raises(ClusterSpecError, match="gavel_gpu_type"):
        load_cluster_spec(bad)
    bad.write_text("node_groups: [{count: 1, gpus: 1, gpu_memory_mib: 1, topology: nope.txt}]\n")
    with pytest.raises(ClusterSpecError, match="topology file not found"):
        load_cluster_spec(bad, tmp_path)

"""Cost-model numbers checked by hand against the formulas in scheduler.topology.links/cost."""

from __future__ import annotations

import math

import pytest

from scheduler.topology.cost import (
    CommProfile,
    allreduce_time,
    domain_load,
    iteration_time,
    multi_node_bandwidth,
    pcie_domains,
    ring_bandwidth,
)
from tests.scheduler.topology.topo_helpers import dgx1_volta_test_node, load, needs_data, nv_pairs_node

pytestmark = pytest.mark.data


@needs_data
def test_an_nvlink_bridge_pair_is_ten_times_faster_than_adding_a_third_pcie_gpu() -> None:
    topo = load("a100_pcie_8x_nv12_bridge_pairs")  # Ampere: L = 25, P = 24
    assert ring_bandwidth(topo, [0, 1]) == pytest.approx(12 * 25 * 0.80)  # 240
    # The ring 0-1-2 must use two NODE hops: P x 0.6 = 14.4.
    assert ring_bandwidth(topo, [0, 1, 2]) == pytest.approx(24 * 0.60)
    # Across sockets: min(P, X_cpu=16) x 0.5 = 8.
    assert ring_bandwidth(topo, [0, 4]) == pytest.approx(16 * 0.50)


def test_dgx1_volta_rings_sum_every_nvlink_of_the_weakest_gpu() -> None:
    topo = dgx1_volta_test_node()  # Volta: 25 GB/s per link, eta 0.8 -> 20 per link
    assert ring_bandwidth(topo, range(8)) == pytest.approx(6 * 20)  # 6 links per GPU
    assert ring_bandwidth(topo, [0, 1, 2, 3]) == pytest.approx(4 * 20)  # each GPU: 4 links inside
    assert ring_bandwidth(topo, [0, 1, 4, 5]) == pytest.approx(3 * 20)  # ring 0-1-5-4, 3 links each
    assert ring_bandwidth(topo, [0, 3]) == pytest.approx(2 * 20)
    # {0, 1, 4}: no NVLink ring (1-4 is SYS), so the bottleneck ring pays SYS = min(12, 10) x 0.5.
    assert ring_bandwidth(topo, [0, 1, 4]) == pytest.approx(5.0)


@needs_data
def test_nvswitch_boards_give_every_subset_the_same_bandwidth() -> None:
    topo = load("hgx_h100_8gpu_nvswitch")  # Hopper: 18 links x 25 x 0.82
    for gpus in ([0, 1], [0, 5, 6], range(8)):
        assert ring_bandwidth(topo, gpus) == pytest.approx(18 * 25 * 0.82)


def test_one_gpu_needs_no_communication() -> None:
    topo = dgx1_volta_test_node()
    assert math.isinf(ring_bandwidth(topo, [3]))
    assert allreduce_time(1, math.inf, 1e9) == 0.0


def test_allreduce_time_follows_the_ring_formula() -> None:
    # 2 (n-1)/n x M / R + 2 (n-1) alpha = 1.5 x 100e6 / 80e9 + 6 x 5e-6
    assert allreduce_time(4, 80.0, 100e6) == pytest.approx(1.875e-3 + 30e-6)
    assert allreduce_time(2, 10.0, 50e6, across_nodes=True) == pytest.approx(50e6 / 10e9 + 2 * 25e-6)


def test_iteration_time_is_compute_times_slowdown_plus_communication() -> None:
    job = CommProfile(compute_s=0.5, message_bytes=100e6)
    assert iteration_time(4, 80.0, job) == pytest.approx(0.5 + 1.905e-3)
    assert iteration_time(4, 80.0, job, slowdown=1.3) == pytest.approx(0.65 + 1.905e-3)


def test_comm_profile_reads_job_profile_keys_and_ignores_bad_values() -> None:
    assert CommProfile.from_profile({"compute_s": 0.3, "gradient_mb": 50}) == CommProfile(0.3, 50e6)
    assert CommProfile.from_profile({"compute_s": "fast"}) == CommProfile()


@needs_data
def test_rings_through_uplinks_used_by_running_jobs_lose_bandwidth() -> None:
    topo = load("pcie_8gpu_pix_pairs_2socket")  # generic: P = 24
    assert sorted(pcie_domains(topo)) == sorted([0b11, 0b1100, 0b110000, 0b11000000, 0b1111, 0b11110000])
    running = [(1, 2)]  # a PHB ring: loads the uplinks of switch {0,1} and switch {2,3}
    assert domain_load(topo, running) == {0b11: 1, 0b1100: 1}
    assert ring_bandwidth(topo, [0, 3]) == pytest.approx(24 * 0.70)  # PHB 16.8
    assert ring_bandwidth(topo, [0, 3], running=running) == pytest.approx(24 * 0.70 / 2)
    assert ring_bandwidth(topo, [4, 6], running=running) == pytest.approx(24 * 0.70)  # other socket
    assert ring_bandwidth(topo, [0, 1], running=running) == pytest.approx(24 * 0.90)  # stays in a switch


def test_nvlink_rings_are_not_slowed_by_pcie_traffic() -> None:
    topo = nv_pairs_node(4, [(0, 1, 4), (2, 3, 4)], default="NODE")
    assert domain_load(topo, [(1, 2)]) == {}  # a single NODE domain: no uplink inside the node
    assert ring_bandwidth(topo, [0, 1], running=[(2, 3)]) == pytest.approx(4 * 25 * 0.8)


@needs_data
def test_several_nodes_are_limited_by_the_network() -> None:
    topo = load("dgx_a100")  # 8 NICs share a PCIe switch with a GPU: 8 x 12 x 0.9
    assert topo.near_nic_count == 8
    assert multi_node_bandwidth([(topo, 246.0), (topo, 246.0)]) == pytest.approx(8 * 12 * 0.9)
    lone = load("rtx_a6000x3_nv4_bridge_pair")  # no NIC columns: one 100 Gbit NIC assumed
    assert multi_node_bandwidth([(topo, 246.0), (lone, 1e9)]) == pytest.approx(12 * 0.9)

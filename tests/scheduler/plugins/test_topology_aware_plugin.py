"""The ``topology_aware`` plugin inside ``scheduler.schedule``: GPU sets, node choice, gangs."""

from __future__ import annotations

import pytest

from scheduler.engine.schedule import schedule
from scheduler.framework import Profile
from scheduler.model import ClusterSnapshot, Decision, Gpu, JobRequest, Node, Placement, TaskRequest
from scheduler.plugin_registry import create_plugin
from scheduler.topology.graph import Topology
from tests.scheduler.topology.topo_helpers import load, needs_data

pytestmark = pytest.mark.data

PROFILE = Profile(
    name="topology-test",
    filters=("resource_fit",),
    scores={"topology_aware": 1.0},
    gpu_chooser="topology_aware",
    multi_gpu_chooser="topology_aware",
)


def _node(name: str, topo: Topology | dict | None, busy: tuple[int, ...] = (), gpus: int = 8) -> Node:
    node = Node(
        name=name,
        cpu_milli=64000,
        memory_mib=512000,
        gpus=[Gpu(index=i, model="A100", memory_mib=40000) for i in range(gpus)],
        topology=topo,
    )
    for i in busy:
        node.gpus[i].used_milli = 1000
        node.gpus[i].used_memory_mib = 40000
        node.gpus[i].tenants.append(f"other-{i}")
    return node


def _job(job_id: str, tasks: int, gpus: int) -> JobRequest:
    return JobRequest(
        job_id=job_id, tasks=[TaskRequest(task_id=f"{job_id}-{k}", gpus=gpus) for k in range(tasks)]
    )


def _check_invariants(snapshot: ClusterSnapshot, decision: Decision, jobs: list[JobRequest]) -> None:
    """No GPU given twice or while busy; every job fully placed or not at all."""
    taken: set[tuple[str, int]] = set()
    for p in decision.placements:
        node = snapshot.node(p.node)
        for g in p.gpu_indices:
            assert node.gpus[g].is_idle, f"{p.task_id} got busy GPU {g}"
            assert (p.node, g) not in taken
            taken.add((p.node, g))
    for job in jobs:
        placed = decision.placements_for(job.job_id)
        assert len(placed) in (0, len(job.tasks))
        assert (len(placed) == 0) == (job.job_id in decision.unschedulable)


def test_the_plugin_is_registered_under_its_name() -> None:
    assert create_plugin("topology_aware").name == "topology_aware"


@needs_data
def test_a_two_gpu_task_gets_an_nvlink_pair_not_the_first_free_gpus() -> None:
    topo = load("a100_pcie_8x_nv12_bridge_pairs")
    snapshot = ClusterSnapshot(nodes=[_node("a", topo, busy=(0,))])
    job = _job("j", 1, 2)
    decision = schedule(snapshot, [job], PROFILE)
    _check_invariants(snapshot, decision, [job])
    assert decision.placements[0].gpu_indices == (2, 3)


@needs_data
def test_the_node_with_a_free_nvlink_pair_wins_over_the_first_node() -> None:
    topo = load("a100_pcie_8x_nv12_bridge_pairs")
    snapshot = ClusterSnapshot(
        nodes=[_node("a", topo, busy=(0, 2, 4, 6)), _node("b", topo.to_dict(), busy=(0, 1))]
    )
    decision = schedule(snapshot, [_job("j", 1, 2)], PROFILE)
    assert decision.placements[0].node == "b"
    assert topo.link(*decision.placements[0].gpu_indices) == "NV12"


@needs_data
def test_a_multi_task_job_follows_its_gang_plan_onto_nvlink_pairs_of_one_socket() -> None:
    topo = load("a100_pcie_8x_nv12_bridge_pairs")
    snapshot = ClusterSnapshot(nodes=[_node("a", topo, busy=(0, 5)), _node("b", topo)])
    job = _job("j", 2, 2)
    decision = schedule(snapshot, [job], PROFILE)
    _check_invariants(snapshot, decision, [job])
    placed = decision.placements_for("j")
    assert {p.node for p in placed} == {"b"}
    assert all(topo.link(*p.gpu_indices) == "NV12" for p in placed)
    numa = {topo.numa[g] for p in placed for g in p.gpu_indices}
    assert len(numa) == 1


@needs_data
def test_a_gang_too_big_for_the_cluster_places_nothing() -> None:
    topo = load("dgx_a100")
    snapshot = ClusterSnapshot(nodes=[_node("a", topo, busy=(0, 1, 2, 3)), _node("b", topo, busy=(0,))])
    big, small = _job("big", 3, 4), _job("small", 1, 2)
    decision = schedule(snapshot, [big, small], PROFILE)
    _check_invariants(snapshot, decision, [big, small])
    assert "big" in decision.unschedulable
    assert len(decision.placements_for("small")) == 1


@needs_data
def test_a_one_gpu_task_does_not_split_an_nvlink_pair() -> None:
    topo = load("rtx_a6000x3_nv4_bridge_pair")
    snapshot = ClusterSnapshot(nodes=[_node("a", topo, gpus=3)])
    decision = schedule(snapshot, [_job("j", 1, 1)], PROFILE)
    assert decision.placements[0].gpu_indices == (2,)


@needs_data
def test_a_shared_task_joins_an_already_shared_gpu_before_opening_a_whole_one() -> None:
    topo = load("rtx_a6000x3_nv4_bridge_pair")
    node = _node("a", topo, gpus=3)
    node.gpus[1].used_milli = 300
    node.gpus[1].used_memory_mib = 1000
    node.gpus[1].tenants.append("x")
    snapshot = ClusterSnapshot(nodes=[node])
    job = JobRequest(job_id="s", tasks=[TaskRequest(task_id="s-0", gpu_milli=500, gpu_memory_mib=1000)])
    decision = schedule(snapshot, [job], PROFILE)
    assert decision.placements[0].gpu_indices == (1,)
    idle = _node("b", topo, gpus=3)
    decision = schedule(ClusterSnapshot(nodes=[idle]), [job], PROFILE)
    assert decision.placements[0].gpu_indices == (2,)


def test_nodes_without_a_topology_fall_back_to_the_lowest_free_gpus() -> None:
    snapshot = ClusterSnapshot(nodes=[_node("a", None, busy=(1,))])
    decision = schedule(snapshot, [_job("j", 1, 2)], PROFILE)
    assert decision.placements[0].gpu_indices == (0, 2)


@needs_data
def test_running_jobs_group_by_job_for_uplink_penalties() -> None:
    topo = load("pcie_8gpu_pix_pairs_2socket")
    node = _node("a", topo, busy=(1, 2, 5, 7))
    # GPUs 1 and 2 belong to one running job (two tasks): its ring loads two switch uplinks.
    node.gpus[1].tenants[:] = ["r-0"]
    node.gpus[2].tenants[:] = ["r-1"]
    running = [
        Placement(job_id="r", task_id="r-0", node="a", gpu_indices=(1,), gpu_milli=1000),
        Placement(job_id="r", task_id="r-1", node="a", gpu_indices=(2,), gpu_milli=1000),
    ]
    decision = schedule(ClusterSnapshot(nodes=[node], running=running), [_job("j", 1, 2)], PROFILE)
    assert decision.placements[0].gpu_indices == (4, 6)


@needs_data
def test_fractional_tasks_of_one_job_share_a_gpu_or_an_nvlink_pair() -> None:
    topo = load("a100_pcie_8x_nv12_bridge_pairs")
    node = _node("a", topo)
    for g in (0, 2, 4, 6):  # every pair half-used by other tenants
        node.gpus[g].used_milli = 400
        node.gpus[g].used_memory_mib = 1000
        node.gpus[g].tenants.append(f"x{g}")
    job = JobRequest(
        job_id="f",
        tasks=[TaskRequest(task_id=f"f-{k}", gpu_milli=600, gpu_memory_mib=1000) for k in range(3)],
    )
    decision = schedule(ClusterSnapshot(nodes=[node]), [job], PROFILE)
    gpus = sorted(p.gpu_indices[0] for p in decision.placements_for("f"))
    # f-0 shares GPU 0; f-1 joins over its NV12 link on GPU 1; f-2 fits neither, so it takes the
    # same-socket GPU that is already shared (2) rather than opening GPU 3 or crossing the socket.
    assert gpus == [0, 1, 2]

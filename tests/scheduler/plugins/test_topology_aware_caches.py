"""The ``topology_aware`` plugin's per-snapshot index and choice cache give the uncached answers."""

from __future__ import annotations

import dataclasses

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.framework import CycleState
from scheduler.model import ClusterSnapshot, Gpu, JobRequest, Node, Placement, TaskRequest
from scheduler.plugin_registry import create_plugin
from scheduler.topology.graph import Topology
from tests.scheduler.topology.topo_helpers import dgx1_volta_test_node


def _node(name: str, topo: Topology | None, tenants: dict[int, str]) -> Node:
    node = Node(
        name=name,
        cpu_milli=64000,
        memory_mib=512000,
        gpus=[Gpu(index=i, model="V100", memory_mib=16000) for i in range(8)],
        topology=topo,
    )
    for i, tenant in tenants.items():
        node.gpus[i].used_milli = 1000
        node.gpus[i].used_memory_mib = 16000
        node.gpus[i].tenants.append(tenant)
    return node


def _state(snapshot: ClusterSnapshot, job: JobRequest) -> CycleState:
    state = CycleState(snapshot=snapshot, data={}, arrays=ClusterArrays.from_snapshot(snapshot))
    state.job = job
    return state


def _cluster() -> ClusterSnapshot:
    topo = dgx1_volta_test_node()
    nodes = [
        _node("a", topo, {0: "r-0", 1: "r-1", 4: "s-0"}),
        _node("b", topo, {2: "r-2", 3: "t-0", 5: "t-1"}),
        _node("c", None, {}),
        _node("d", topo, {}),
    ]
    running = [
        Placement(job_id="r", task_id="r-0", node="a", gpu_indices=(0,), gpu_milli=1000),
        Placement(job_id="r", task_id="r-1", node="a", gpu_indices=(1,), gpu_milli=1000),
        Placement(job_id="r", task_id="r-2", node="b", gpu_indices=(2,), gpu_milli=1000),
        Placement(job_id="t", task_id="t-0", node="b", gpu_indices=(3,), gpu_milli=1000),
        Placement(job_id="t", task_id="t-1", node="b", gpu_indices=(5,), gpu_milli=1000),
    ]
    return ClusterSnapshot(nodes=nodes, running=running)


def test_running_groups_come_from_the_nodes_own_placements() -> None:
    snapshot = _cluster()
    plugin = create_plugin("topology_aware")
    state = _state(snapshot, JobRequest(job_id="j", tasks=[TaskRequest(task_id="j-0", gpus=2)]))
    # Job r holds GPUs 0, 1 on a and 2 on b: grouped on a only; t's two GPUs on b form one group.
    assert plugin._running(state, snapshot.nodes[0], set()) == ((0, 1),)
    assert plugin._running(state, snapshot.nodes[1], set()) == ((3, 5),)
    assert plugin._running(state, snapshot.nodes[1], {"t-0"}) == ()
    assert plugin._running(state, snapshot.nodes[3], set()) == ()


def test_batch_scores_equal_per_node_scores_after_a_task_of_the_job_is_placed() -> None:
    snapshot = _cluster()
    plugin = create_plugin("topology_aware")
    job = JobRequest(job_id="j", tasks=[TaskRequest(task_id=f"j-{k}", gpus=2) for k in range(2)])
    state = _state(snapshot, job)
    rows = np.arange(len(snapshot.nodes))
    before = plugin.score_rows(state, job.tasks[1], rows)
    assert list(before) == [plugin.score(state, job.tasks[1], n) for n in snapshot.nodes]
    # The job's first task lands on d within the cycle (no gang plan: ask as a single task would).
    state.data["topology_aware.plans"] = {"j": {}}
    snapshot.nodes[3].gpus[0].tenants.append("j-0")
    snapshot.nodes[3].gpus[0].used_milli = 1000
    after = plugin.score_rows(state, job.tasks[1], rows)
    assert list(after) == [plugin.score(state, job.tasks[1], n) for n in snapshot.nodes]
    assert plugin._job_nodes(state) == {"d"}


def test_the_node_index_follows_a_new_snapshot() -> None:
    snapshot = _cluster()
    plugin = create_plugin("topology_aware")
    task = TaskRequest(task_id="j-0", gpus=2)
    state = _state(snapshot, JobRequest(job_id="j", tasks=[task]))
    assert not plugin.is_neutral(state, task, np.array([3]))
    assert plugin.is_neutral(state, task, np.array([2]))
    # Next cycle: node d lost its topology, c gained one.
    nodes = list(snapshot.nodes)
    nodes[2] = dataclasses.replace(nodes[2], topology=nodes[3].topology)
    nodes[3] = dataclasses.replace(nodes[3], topology=None)
    state2 = _state(ClusterSnapshot(nodes=nodes, running=snapshot.running), state.job)  # type: ignore[arg-type]
    assert plugin.is_neutral(state2, task, np.array([3]))
    assert not plugin.is_neutral(state2, task, np.array([2]))


def test_equal_topologies_share_a_fingerprint_id_and_different_ones_do_not() -> None:
    plugin = create_plugin("topology_aware")
    a, b = dgx1_volta_test_node(), dgx1_volta_test_node()
    assert a is not b and a.fingerprint == b.fingerprint
    other = dataclasses.replace(a, nvswitch=not a.is_nvswitch)
    assert other.fingerprint != a.fingerprint
    assert plugin._fingerprint_id(a) == plugin._fingerprint_id(b)
    assert plugin._fingerprint_id(other) != plugin._fingerprint_id(a)
    # The cached choice is the one choose_set makes for that topology.
    from scheduler.topology import choose_set

    for topo in (a, other):
        got = plugin._choice(topo, (0, 1, 2, 3, 4, 5, 6, 7), 2, (), (), plugin.default_profile)
        assert got == choose_set(
            topo, (0, 1, 2, 3, 4, 5, 6, 7), 2, running=(), held=(), job=plugin.default_profile
        )

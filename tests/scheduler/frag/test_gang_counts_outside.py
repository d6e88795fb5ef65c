"""The balance term's gang reservation sees the whole cluster when the snapshot leaves nodes out.

The simulator offers ``schedule()`` only nodes with free GPUs and, of identical ones, only as many as
the call has tasks; it gives what the left-out nodes add in ``CycleState.data["gang_counts_outside"]``
(free milli-GPU, empty nodes per GPU count), which ``gang_reserved_sizes`` adds to the snapshot's.
"""

from __future__ import annotations

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.frag.fragmentation import TargetWorkload
from scheduler.frag.lookahead import gang_reserved_sizes
from scheduler.framework import CycleState
from scheduler.model import ClusterSnapshot, Gpu, Node, TaskRequest
from scheduler.policy.registry import make_policy
from scheduler.sim.engine import Simulator
from scheduler.sim.trace import TraceJob
from tests.scheduler.sim.sim_helpers import cluster, two_type_perf


def gpu_node(name: str, used: list[int], cpu: int = 32000, used_cpu: int = 0) -> Node:
    return Node(
        name=name,
        cpu_milli=cpu,
        memory_mib=128000,
        used_cpu_milli=used_cpu,
        gpus=[Gpu(index=i, model="T4", memory_mib=16000, used_milli=u) for i, u in enumerate(used)],
    )


ONE = TaskRequest("one", cpu_milli=4000, memory_mib=8000, gpus=1)
GANG = TaskRequest("gang", cpu_milli=32000, memory_mib=64000, gpus=8)


def state_for(nodes: list[Node], data: dict[str, object] | None = None) -> CycleState:
    # 8-GPU tasks ask for 8 / 40 = 20 % of the workload's GPU request.
    workload = TargetWorkload.from_tasks([ONE] * 32 + [GANG])
    return CycleState(
        snapshot=ClusterSnapshot(nodes=nodes),
        data={"target_workload": workload, **(data or {})},
        arrays=ClusterArrays.from_nodes(nodes),
        seeded_rng=np.random.default_rng(0),
    )


# a: an empty 8-GPU node; b: an 8-GPU node with 2 GPUs busy (6 idle).
SNAPSHOT = [
    gpu_node("a", [0] * 8, cpu=96000),
    gpu_node("b", [1000, 1000] + [0] * 6, cpu=96000, used_cpu=8000),
]


def test_without_counts_the_snapshot_alone_decides() -> None:
    # 14 idle GPUs: demand 0.2 * 14 / 8 = 0.35 < the 1 empty 8-GPU node: nothing reserved.
    assert gang_reserved_sizes(state_for(SNAPSHOT)) == ()


def test_the_left_out_nodes_idle_gpus_raise_the_demand() -> None:
    # 16 left-out empty 2-GPU nodes: 14 + 32 = 46 idle GPUs, demand 0.2 * 46 / 8 = 1.15 >= 1 empty
    # 8-GPU node: 8 is reserved (as if the 2-GPU nodes were in the snapshot).
    state = state_for(SNAPSHOT, {"gang_counts_outside": (32_000, {2: 16})})
    assert gang_reserved_sizes(state) == (8,)
    whole = SNAPSHOT + [gpu_node(f"s{i}", [0, 0]) for i in range(16)]
    assert gang_reserved_sizes(state_for(whole)) == (8,)


def test_left_out_empty_nodes_count_against_the_demand() -> None:
    # One more empty 8-GPU node left out: 14 + 8 = 22 idle GPUs, demand 0.2 * 22 / 8 = 0.55, and
    # 2 empty 8-GPU nodes > 0.55: nothing reserved, although the snapshot shows one empty node only.
    state = state_for(SNAPSHOT, {"gang_counts_outside": (8_000, {8: 1})})
    assert gang_reserved_sizes(state) == ()
    # Three more (24 idle GPUs more): 14 + 24 = 38, demand 0.95 < 4 empty nodes: still nothing.
    assert gang_reserved_sizes(state_for(SNAPSHOT, {"gang_counts_outside": (24_000, {8: 3})})) == ()


def test_the_simulator_counts_the_nodes_a_call_leaves_out() -> None:
    spec = cluster(nodes=4, gpus=2)
    jobs = [TraceJob(job_id="j0", submit=0.0, duration=100.0, num_gpus=1)]
    sim = Simulator(jobs, spec, make_policy("ours"), two_type_perf(0.9, 0.9))
    # Node 1 runs a job on one GPU (and uses CPU); nodes 0, 2, 3 are empty.
    sim.nodes[1].used_cpu_milli = 1000
    sim.nodes[1].gpus[0].used_milli = 1000
    sim.free_milli[2] = 0
    # The call offers nodes 0 and 1: left out are 2 and 3, both empty 2-GPU nodes (4000 milli).
    assert sim._gang_counts_outside([0, 1]) == (4000, {2: 2})
    # Offering 0 and 2 leaves out 1 (one idle GPU, not empty) and 3 (empty).
    assert sim._gang_counts_outside([0, 2]) == (3000, {2: 1})

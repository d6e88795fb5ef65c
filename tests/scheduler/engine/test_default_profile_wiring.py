"""The platform's ``default`` profile is the full scheduler: topology-aware GPU sets, gangs and
interference-aware admission, and on nodes without topology it places exactly like FGD + balance.

Topologies are built here from ``nvidia-smi topo -m`` text (no shared data needed).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from sched_invariants import check_invariants
from test_scheduling_properties import clusters, queues

from scheduler.engine.schedule import schedule
from scheduler.framework import Profile
from scheduler.model import ClusterSnapshot, Decision, Gpu, JobRequest, Node, Placement, TaskRequest
from scheduler.profiles import get_profile
from scheduler.topology import parse_topology, ring_bandwidth
from scheduler.topology.graph import Topology

# DGX-1 (V100, hybrid cube mesh): the GPU rows of its `nvidia-smi topo -m` output.
DGX1 = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\n"
    "GPU0\t X \tNV1\tNV1\tNV2\tNV2\tSYS\tSYS\tSYS\t0-19,40-59\n"
    "GPU1\tNV1\t X \tNV2\tNV1\tSYS\tNV2\tSYS\tSYS\t0-19,40-59\n"
    "GPU2\tNV1\tNV2\t X \tNV2\tSYS\tSYS\tNV1\tSYS\t0-19,40-59\n"
    "GPU3\tNV2\tNV1\tNV2\t X \tSYS\tSYS\tSYS\tNV1\t0-19,40-59\n"
    "GPU4\tNV2\tSYS\tSYS\tSYS\t X \tNV1\tNV1\tNV2\t20-39,60-79\n"
    "GPU5\tSYS\tNV2\tSYS\tSYS\tNV1\t X \tNV2\tNV1\t20-39,60-79\n"
    "GPU6\tSYS\tSYS\tNV1\tSYS\tNV1\tNV2\t X \tNV2\t20-39,60-79\n"
    "GPU7\tSYS\tSYS\tSYS\tNV1\tNV2\tNV1\tNV2\t X \t20-39,60-79\n"
)
# Three GPUs: 0 and 1 bridged by four NVLinks, 2 alone on PCIe.
BRIDGED_PAIR = (
    "\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tNV4\tNODE\t0-31\t0\n"
    "GPU1\tNV4\t X \tNODE\t0-31\t0\n"
    "GPU2\tNODE\tNODE\t X \t0-31\t0\n"
)

# The default profile's fragmentation plugins alone, without the interference and topology plugins.
FRAGMENTATION_ONLY = Profile(
    name="fragmentation-only",
    filters=("resource_fit",),
    scores={"fgd_fine": 1.0, "balance_yield": 0.5, "strand_guard": 1.0},
    gpu_chooser="fgd_fine_gpus",
)


def _node(name: str, topology: Topology | str | None, gpus: int = 8, busy: tuple[int, ...] = ()) -> Node:
    node = Node(
        name=name,
        cpu_milli=80_000,
        memory_mib=512_000,
        gpus=[Gpu(index=i, model="Tesla V100", memory_mib=16_384) for i in range(gpus)],
        topology=topology,
    )
    for i in busy:
        node.gpus[i].used_milli = 1000
        node.gpus[i].used_memory_mib = 16_384
        node.gpus[i].tenants.append(f"{name}-busy-{i}")
    return node


def _whole(job_id: str, tasks: int, gpus: int) -> JobRequest:
    return JobRequest(
        job_id=job_id,
        tasks=[
            TaskRequest(task_id=f"{job_id}-{k}", cpu_milli=1000, memory_mib=4096, gpus=gpus)
            for k in range(tasks)
        ],
    )


def _placed(decision: Decision, job_id: str) -> list[Placement]:
    placed = decision.placements_for(job_id)
    assert placed, decision.unschedulable
    return placed


def test_a_two_gpu_job_gets_a_dual_nvlink_pair_on_a_dgx1_node() -> None:
    # Free: 0, 5, 6, 7. The lowest two (0, 5) only meet over the socket link (SYS).
    topo = parse_topology(DGX1)
    snapshot = ClusterSnapshot(nodes=[_node("a", DGX1, busy=(1, 2, 3, 4))])
    job = _whole("j", 1, 2)
    decision = schedule(snapshot, [job], get_profile("default"))
    check_invariants(snapshot, [job], decision)
    (placement,) = _placed(decision, "j")
    assert topo.link(*placement.gpu_indices) == "NV2"
    assert "topology: GPUs" in placement.reason and "GB/s" in placement.reason
    # What the fragmentation-only profile did: the first free GPUs, across the sockets.
    (before,) = schedule(snapshot, [job], FRAGMENTATION_ONLY).placements
    assert topo.link(*before.gpu_indices) == "SYS"


def test_a_one_gpu_job_does_not_split_an_nvlink_pair_when_another_gpu_will_do() -> None:
    snapshot = ClusterSnapshot(nodes=[_node("a", BRIDGED_PAIR, gpus=3)])
    job = _whole("j", 1, 1)
    decision = schedule(snapshot, [job], get_profile("default"))
    assert _placed(decision, "j")[0].gpu_indices == (2,)
    # ...and the next 2-GPU job still gets the bridged pair.
    snapshot.nodes[0].gpus[2].used_milli = 1000
    snapshot.nodes[0].gpus[2].tenants.append("j-0")
    pair = schedule(snapshot, [_whole("p", 1, 2)], get_profile("default"))
    assert _placed(pair, "p")[0].gpu_indices == (0, 1)


def test_a_four_task_gang_of_one_gpu_each_lands_together_on_an_nvlink_ring() -> None:
    # Node a has five free GPUs without any NVLink ring of four; node b has 0-3-7-4, a ring.
    topo = parse_topology(DGX1)
    snapshot = ClusterSnapshot(nodes=[_node("a", DGX1, busy=(0, 1, 6)), _node("b", DGX1, busy=(1, 2, 5))])
    job = _whole("g", 4, 1)
    decision = schedule(snapshot, [job], get_profile("default"))
    check_invariants(snapshot, [job], decision)
    placed = _placed(decision, "g")
    assert len(placed) == 4 and {p.node for p in placed} == {"b"}
    gpus = sorted(g for p in placed for g in p.gpu_indices)
    assert gpus == [0, 3, 4, 7]
    # A ring over NVLinks only: every GPU of the set talks to two others of it over NVLink.
    assert all(sum(topo.link(g, h).startswith("NV") for h in gpus if h != g) >= 2 for g in gpus)
    assert ring_bandwidth(topo, gpus) > ring_bandwidth(topo, [2, 3, 4, 5])  # node a's best needs SYS
    # The fragmentation-only profile spread the same gang over both nodes.
    assert len({p.node for p in schedule(snapshot, [job], FRAGMENTATION_ONLY).placements}) == 2


def test_a_gang_that_does_not_fit_places_none_of_its_tasks() -> None:
    snapshot = ClusterSnapshot(nodes=[_node("a", DGX1, busy=(0, 1, 2, 3, 4)), _node("b", None, busy=(0,))])
    big, small = _whole("big", 3, 4), _whole("small", 1, 2)
    decision = schedule(snapshot, [big, small], get_profile("default"))
    check_invariants(snapshot, [big, small], decision)
    assert "big" in decision.unschedulable and not decision.placements_for("big")
    assert len(decision.placements_for("small")) == 1


def _shared_cluster(tenant_util: float, tenant_tolerance: float | None = None) -> ClusterSnapshot:
    """One node, two GPUs; 600 milli of GPU 0 used by a running job with the given solo utilisation
    (a 400-milli newcomer fills GPU 0 exactly, which is where fragmentation alone puts it)."""
    node = _node("n", None, gpus=2)
    node.gpus[0].used_milli = 600
    node.gpus[0].used_memory_mib = 4000
    node.gpus[0].tenants = ["run-0"]
    running = Placement(
        job_id="run", task_id="run-0", node="n", gpu_indices=(0,), gpu_milli=600, gpu_memory_mib=4000
    )
    profile: dict[str, float | str] = {"gpu_util": tenant_util, "mem_util": 20.0}
    if tenant_tolerance is not None:
        profile["slowdown_tolerance"] = tenant_tolerance
    return ClusterSnapshot(nodes=[node], running=[running], task_profiles={"run-0": profile})


def _fractional(util: float, tolerance: float = 1.5) -> JobRequest:
    return JobRequest(
        job_id="f",
        tasks=[
            TaskRequest(task_id="f-0", cpu_milli=1000, memory_mib=4096, gpu_milli=400, gpu_memory_mib=2000)
        ],
        slowdown_tolerance=tolerance,
        profile={"gpu_util": util, "mem_util": 20.0},
    )


def test_a_fractional_job_is_kept_off_a_gpu_where_it_would_slow_down_beyond_its_tolerance() -> None:
    snapshot = _shared_cluster(tenant_util=90.0)
    job = _fractional(util=85.0)
    # Fragmentation alone packs it next to the running job (filling GPU 0) ...
    assert schedule(snapshot, [job], FRAGMENTATION_ONLY).placements[0].gpu_indices == (0,)
    # ... the default profile's filter admits the node for GPU 1 only, and the chooser respects it.
    (placement,) = _placed(schedule(snapshot, [job], get_profile("default")), "f")
    assert placement.gpu_indices == (1,)
    assert placement.predicted_slowdown == 1.0
    assert "interference: alone on GPU" in placement.reason


def test_a_fractional_job_is_kept_off_a_gpu_whose_tenant_would_exceed_its_own_tolerance() -> None:
    job = _fractional(util=30.0, tolerance=3.0)
    tolerant = schedule(
        _shared_cluster(tenant_util=60.0, tenant_tolerance=3.0), [job], get_profile("default")
    )
    assert _placed(tolerant, "f")[0].gpu_indices == (0,)
    strict = schedule(_shared_cluster(tenant_util=60.0, tenant_tolerance=1.05), [job], get_profile("default"))
    assert _placed(strict, "f")[0].gpu_indices == (1,)


def test_light_jobs_share_a_gpu_and_the_placement_carries_the_prediction_and_its_reason() -> None:
    snapshot = _shared_cluster(tenant_util=20.0)
    (placement,) = _placed(schedule(snapshot, [_fractional(util=20.0)], get_profile("default")), "f")
    assert placement.gpu_indices == (0,)
    assert placement.predicted_slowdown is not None and 1.0 < placement.predicted_slowdown <= 1.5
    assert "interference: predicted slowdown" in placement.reason and "next to 1 job(s)" in placement.reason


def test_a_fractional_job_waits_when_every_gpu_would_slow_it_down_too_much() -> None:
    snapshot = _shared_cluster(tenant_util=90.0)
    snapshot.nodes[0].gpus[1].used_milli = 600
    snapshot.nodes[0].gpus[1].tenants = ["run-0"]
    decision = schedule(snapshot, [_fractional(util=85.0)], get_profile("default"))
    assert not decision.placements
    assert "> tolerance 1.50x" in decision.unschedulable["f"]


def test_without_profiles_the_declared_shares_only_cap_how_many_jobs_share_a_gpu() -> None:
    # Nobody has a measured profile: each resident costs everyone the analytic 10 %, so with the
    # default tolerance of 1.5x four residents are fine (1.4x) and six are not (1.6x): the small
    # job then takes the idle GPU, where fragmentation alone would still pack it.
    node = _node("n", None, gpus=2)
    node.gpus[0].used_milli = 500
    node.gpus[0].tenants = [f"r-{k}" for k in range(4)]
    job = JobRequest(job_id="s", tasks=[TaskRequest(task_id="s-0", gpu_milli=50)])
    (placement,) = _placed(schedule(ClusterSnapshot(nodes=[node]), [job], get_profile("default")), "s")
    assert placement.gpu_indices == (0,) and placement.predicted_slowdown == 1.4
    assert "next to 4 job(s)" in placement.reason and "declared GPU shares" in placement.reason
    node.gpus[0].tenants += ["r-4", "r-5"]
    assert schedule(ClusterSnapshot(nodes=[node]), [job], FRAGMENTATION_ONLY).placements[0].gpu_indices == (
        0,
    )
    (placement,) = _placed(schedule(ClusterSnapshot(nodes=[node]), [job], get_profile("default")), "s")
    assert placement.gpu_indices == (1,) and placement.predicted_slowdown == 1.0


def _decisions(decision: Decision) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(p.task_id, p.node, p.gpu_indices) for p in decision.placements]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=clusters(), pending=queues())
def test_on_nodes_without_topology_the_default_places_exactly_like_its_fragmentation_plugins(
    snapshot: ClusterSnapshot, pending: list[JobRequest]
) -> None:
    default = schedule(snapshot, pending, get_profile("default"))
    check_invariants(snapshot, pending, default)
    before = schedule(snapshot, pending, FRAGMENTATION_ONLY)
    assert _decisions(default) == _decisions(before)
    assert default.unschedulable.keys() == before.unschedulable.keys()


def test_on_nodes_without_topology_shared_and_gang_jobs_place_like_the_fragmentation_plugins() -> None:
    nodes = [_node(f"n{i}", None, busy=(0,) if i % 2 else ()) for i in range(3)]
    for i, node in enumerate(nodes):  # residents known by id only, as on the Alibaba benchmark
        node.gpus[3].used_milli = 300 + 100 * i
        node.gpus[3].tenants = [f"x{i}-{k}" for k in range(i + 1)]
    pending = [
        JobRequest("s1", [TaskRequest("s1-0", cpu_milli=2000, memory_mib=8000, gpu_milli=300)]),
        _whole("w2", 1, 2),
        JobRequest("fs", [TaskRequest(f"fs-{k}", cpu_milli=1000, gpu_milli=250) for k in range(3)]),
        _whole("g", 2, 2),
        JobRequest("s2", [TaskRequest("s2-0", gpu_milli=600, gpu_memory_mib=1000)]),
    ]
    snapshot = ClusterSnapshot(nodes=nodes)
    default = schedule(snapshot, pending, get_profile("default"))
    check_invariants(snapshot, pending, default)
    assert len(default.placements) == 8
    assert _decisions(default) == _decisions(schedule(snapshot, pending, FRAGMENTATION_ONLY))


def test_the_declared_share_shortcut_predicts_what_the_per_gpu_path_predicts() -> None:
    # A stored tolerance of an unrelated task makes residents' tolerances differ, which turns the
    # per-count table off: the per-GPU prediction must give the same choice and the same numbers.
    for residents in range(8):
        node = _node("n", None, gpus=2)
        node.gpus[0].used_milli = 100 + 50 * residents
        node.gpus[0].tenants = [f"r-{k}" for k in range(residents)]
        job = JobRequest(
            job_id="s", tasks=[TaskRequest(task_id="s-0", gpu_milli=100)], slowdown_tolerance=1.45
        )
        table = schedule(ClusterSnapshot(nodes=[node]), [job], get_profile("default"))
        per_gpu = schedule(
            ClusterSnapshot(nodes=[node], task_profiles={"elsewhere": {"slowdown_tolerance": 9.0}}),
            [job],
            get_profile("default"),
        )
        if table.placements[0].gpu_indices == (0,) and residents:
            assert "declared GPU shares" in table.placements[0].reason
            assert "declared GPU shares" not in per_gpu.placements[0].reason
        assert _decisions(table) == _decisions(per_gpu)
        assert table.placements[0].predicted_slowdown == per_gpu.placements[0].predicted_slowdown
        assert table.placements[0].gpu_indices == ((0,) if residents <= 4 else (1,))

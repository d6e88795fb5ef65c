"""The reason a task fits nowhere is the same from an engine that has placed (and released) work
this cycle as from a fresh engine on the same cluster state: the why-not memo follows the changes."""

from __future__ import annotations

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.placement import PlacementEngine
from scheduler.engine.schedule import schedule
from scheduler.framework import CycleState
from scheduler.model import ClusterSnapshot, Gpu, JobRequest, Node, Placement, TaskRequest
from scheduler.profiles import PROFILES

PROBE = TaskRequest(task_id="probe", cpu_milli=16_000, memory_mib=1_000, gpus=2, gpu_models=("A100",))


def _cluster() -> ClusterSnapshot:
    nodes = [
        Node(
            name=f"n{i}",
            cpu_milli=16_000,
            memory_mib=64_000,
            gpus=[Gpu(index=g, model="A100" if i % 2 else "T4", memory_mib=16_000) for g in range(2)],
            schedulable=i != 3,
        )
        for i in range(6)
    ]
    return ClusterSnapshot(nodes=nodes)


def _engine(snapshot: ClusterSnapshot, profile: str) -> PlacementEngine:
    state = CycleState(snapshot=snapshot, data={}, arrays=ClusterArrays.from_snapshot(snapshot))
    state.job = JobRequest(job_id="probe", tasks=[])
    return PlacementEngine(PROFILES[profile]().build(), state, snapshot.nodes)


def _fresh_reason(snapshot: ClusterSnapshot, profile: str) -> str:
    return _engine(snapshot.copy(), profile).place(PROBE).reason


def _one_gpu(node: str) -> Placement:
    return Placement(job_id="j", task_id=f"one-{node}", node=node, gpu_indices=(0,), gpu_milli=1000)


def test_reason_after_commits_and_releases_matches_a_fresh_engine() -> None:
    for profile in ("default", "first_fit"):
        snapshot = _cluster()
        engine = _engine(snapshot, profile)
        assert engine.place(PROBE).placement is not None  # n1 and n5 are free A100 nodes
        # One GPU taken on each schedulable A100 node: the probe fits nowhere.
        for row in (1, 5):
            engine.commit(row, _one_gpu(f"n{row}"))
        first = engine.place(PROBE)
        assert first.placement is None
        assert "2 node(s): fewer than 2 free whole GPU(s)" in first.reason
        assert "1 node(s): node is not schedulable" in first.reason
        assert first.reason == _fresh_reason(snapshot, profile)
        # n5's GPU freed but its CPU taken: still nowhere, for another reason on n5.
        engine.release(5, _one_gpu("n5"))
        cpu = Placement(job_id="j", task_id="cpu", node="n5", cpu_milli=8_000)
        engine.commit(5, cpu)
        second = engine.place(PROBE)
        assert second.placement is None
        assert "1 node(s): insufficient CPU" in second.reason
        assert "1 node(s): fewer than 2 free whole GPU(s)" in second.reason
        assert second.reason == _fresh_reason(snapshot, profile)
        # Released again, n5 fits: the memo must not keep the old answer.
        engine.release(5, cpu)
        assert engine.place(PROBE).placement is not None


def test_a_shape_refused_again_on_an_unchanged_cluster_gets_the_same_reason_under_its_own_id() -> None:
    for profile in ("default", "first_fit"):
        snapshot = _cluster()
        engine = _engine(snapshot, profile)
        for row in (1, 5):
            engine.commit(row, _one_gpu(f"n{row}"))
        first = engine.place(PROBE)
        again = engine.place(TaskRequest(**{**PROBE.__dict__, "task_id": "probe-2"}))
        assert first.placement is None and again.placement is None
        assert again.reason == first.reason.replace("task probe:", "task probe-2:")
        assert first.reason == _fresh_reason(snapshot, profile)
        # A GPU freed on n5: the refusal is not reused, the probe fits there.
        engine.release(5, _one_gpu("n5"))
        assert engine.place(PROBE).placement is not None


def _tight_node() -> ClusterSnapshot:
    """One GPU with a resident known by id only, and 32 cores (the 'big' jobs ask for more)."""
    node = Node(name="n", cpu_milli=32_000, memory_mib=64_000, gpus=[Gpu(index=0, model="A100")])
    node.gpus[0].used_milli = 300
    node.gpus[0].tenants = ["other-0"]
    return ClusterSnapshot(nodes=[node])


def _shared(job_id: str, tolerance: float, cpu_milli: int) -> JobRequest:
    task = TaskRequest(task_id=f"{job_id}-0", cpu_milli=cpu_milli, gpu_milli=100)
    return JobRequest(job_id=job_id, tasks=[task], slowdown_tolerance=tolerance)


def test_a_job_refused_like_the_one_before_it_is_still_seen_by_the_later_filters() -> None:
    # "big-2" fits nowhere for the same reason as "big" on the same cluster; its tolerance (2.0)
    # still reaches the interference filter, so "small" is judged per GPU (residents' tolerances
    # may differ), not by the declared-share table: the same as when "big-2" is refused first.
    profile = PROFILES["default"]().build()
    big, big2 = _shared("big", 1.5, 64_000), _shared("big-2", 2.0, 64_000)
    small = _shared("small", 1.5, 1_000)
    got = schedule(_tight_node(), [big, big2, small], profile)
    reference = schedule(_tight_node(), [big2, big, small], profile)
    assert set(got.unschedulable) == {"big", "big-2"}
    assert got.unschedulable["big-2"] == got.unschedulable["big"].replace("task big-0", "task big-2-0")
    assert got.unschedulable == reference.unschedulable
    (placed,) = got.placements
    assert placed.reason == reference.placements[0].reason
    assert "declared GPU shares" not in placed.reason

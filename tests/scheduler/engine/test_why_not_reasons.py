"""The reason a task fits nowhere is the same from an engine that has placed (and released) work
this cycle as from a fresh engine on the same cluster state: the why-not memo follows the changes."""

from __future__ import annotations

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.placement import PlacementEngine
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

"""The plan_cycle replay marks a team's running jobs borrowed as the platform's quota ledger does:
its excess over its guarantee on its newest admissions, again when one of its jobs ends."""

from __future__ import annotations

from scheduler.bench.team_sim import TeamSimConfig, TeamSimulator
from scheduler.sim.cluster import ClusterSpec, NodeGroup
from scheduler.sim.trace import TraceJob

SPEC = ClusterSpec(
    "four",
    "v100",
    [NodeGroup(count=1, gpus=4, gpu_model="T4", gpu_memory_mib=16384, cpu_cores=32, memory_gib=128)],
)


def marks_after_each_cycle(jobs: list[TraceJob], guarantees: dict[str, int]) -> dict[float, dict[str, bool]]:
    seen: dict[float, dict[str, bool]] = {}

    def observe(sim: TeamSimulator) -> None:
        seen[sim.now] = {job_id: s.borrowed for job_id, s in sim.running.items()}

    TeamSimulator(jobs, SPEC, "fifo", guarantees, TeamSimConfig(), observer=observe).run()
    return seen


def test_the_newest_jobs_carry_the_excess_and_an_older_borrower_loses_its_mark_when_work_ends() -> None:
    # b is guaranteed 1 GPU: b0 (admitted at 0) is within it, b1 (10) and b2 (20) borrow a's.
    jobs = [
        TraceJob("b0", 0.0, 100.0, 1, team="b"),
        TraceJob("b1", 1.0, 10_000.0, 1, team="b"),
        TraceJob("b2", 11.0, 10_000.0, 1, team="b"),
        TraceJob("a0", 150.0, 100.0, 1, team="a"),  # a cycle after b0 ended
    ]
    seen = marks_after_each_cycle(jobs, {"a": 3, "b": 1})

    assert seen[20.0] == {"b0": False, "b1": True, "b2": True}
    # b0 ended at 100: b holds 2, one beyond its guarantee, and b2 is the newest.
    assert seen[150.0] == {"b1": False, "b2": True, "a0": False}


def test_a_borrower_is_no_longer_marked_once_its_team_is_back_within_its_guarantee() -> None:
    # The A/B example: b (guaranteed 2) runs A (2 GPUs), then B (2) borrowed; A ends.
    jobs = [
        TraceJob("A", 0.0, 100.0, 2, team="b"),
        TraceJob("B", 1.0, 10_000.0, 2, team="b"),
        TraceJob("a0", 150.0, 100.0, 1, team="a"),
    ]
    seen = marks_after_each_cycle(jobs, {"a": 2, "b": 2})

    assert seen[10.0] == {"A": False, "B": True}
    assert seen[150.0] == {"B": False, "a0": False}

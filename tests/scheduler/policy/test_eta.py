"""ETA: ``plan_cycle`` run forward over expected remaining times gives exact start times on a queue
computed by hand."""

from __future__ import annotations

from dataclasses import replace

from scheduler.policy.eta import estimate_starts
from tests.scheduler.policy.scenario import Job, view

NOW = 10_000.0


def test_a_hand_computed_queue_gets_exact_start_times() -> None:
    # One node, 2 GPUs. A ends in 100 s, B in 300 s. FIFO queue: C (2 GPUs, 50 s), then D (1 GPU, 10 s),
    # then E (1 GPU, 40 s).
    running = [Job("A", on=[("n1", (0,))]), Job("B", on=[("n1", (1,))])]
    queue = [Job("C", gpus=2, submitted=1.0), Job("D", submitted=2.0), Job("E", submitted=3.0)]
    v = view({"n1": 2}, running, queue, now=NOW)

    got = estimate_starts(
        v, "fifo", remaining={"A": 100.0, "B": 300.0}, durations={"C": 50.0, "D": 10.0, "E": 40.0}
    )

    # t=100: A ends, 1 GPU free: C (2) does not fit, D does (FIFO placement fills what fits) -> 100.
    # t=110: D ends, E fits -> 110. t=150: E ends. t=300: B ends, both GPUs free: C -> 300.
    assert {j: e.start_at for j, e in got.items()} == {"C": NOW + 300, "D": NOW + 100, "E": NOW + 110}
    assert {e.confidence for e in got.values()} == {"high"}


def test_a_job_behind_work_of_unknown_length_has_no_eta_and_guesses_lower_the_confidence() -> None:
    running = [Job("A", on=[("n1", (0,))]), Job("B", on=[("n1", (1,))])]
    v = view({"n1": 2}, running, [Job("C", gpus=2), Job("D")], now=NOW)

    got = estimate_starts(
        v, "fifo", remaining={"A": 60.0, "B": None}, durations={"C": 10.0, "D": 5.0}, sources={"A": "guess"}
    )

    assert (got["D"].start_at, got["D"].confidence) == (NOW + 60, "low")
    assert got["C"].start_at is None  # B's end is unknown: 2 GPUs are never free


def test_the_next_round_is_replayed_so_a_las_preemption_starts_a_new_job_before_the_long_one_ends() -> None:
    # "old" (2 GPUs, 2.56 GPU-h: LAS level 1) runs 5,000 s more; "new" (level 0) waits for its GPUs.
    old = Job("old", gpus=2, attained_h=2.0, started=9_000.0, on=[("n1", (0, 1))])
    between = replace(view({"n1": 2}, [old], [Job("new")], now=NOW), rounds=False)
    times = {"remaining": {"old": 5_000.0}, "durations": {"new": 100.0}}

    # Without rounds it waits for old's end; with them ours' next round (the next multiple of 360 s
    # after 10,000 s) evicts old for it; at a round (the platform's refresh) it is that round.
    assert estimate_starts(between, "ours", **times)["new"].start_at == NOW + 5_000
    assert estimate_starts(between, "ours", round_s=360.0, **times)["new"].start_at == 10_080.0
    at_round = replace(between, rounds=True)
    assert estimate_starts(at_round, "ours", round_s=360.0, **times)["new"].start_at == NOW


def test_later_rounds_are_replayed_so_a_victim_too_young_at_the_next_round_is_taken_at_a_later_one() -> None:
    # "old" (level 1) started 200 s ago and may not be evicted before it has run 500 s: the next round
    # (10,080: 280 s run) may not take it, the one after (10,440: 640 s run) may.
    old = Job("old", gpus=2, attained_h=2.0, started=9_800.0, min_runtime_s=500.0, on=[("n1", (0, 1))])
    between = replace(view({"n1": 2}, [old], [Job("new", gpus=2)], now=NOW), rounds=False)
    times = {"remaining": {"old": 5_000.0}, "durations": {"new": 100.0}}

    assert estimate_starts(between, "ours", round_s=360.0, **times)["new"].start_at == NOW + 5_000
    assert estimate_starts(between, "ours", round_s=360.0, rounds=2, **times)["new"].start_at == 10_440.0
    # The second round adds a step to the bound: two steps (now, 10,080) plus one reach 10,440.
    got = estimate_starts(between, "ours", round_s=360.0, rounds=2, max_steps=2, **times)
    assert got["new"].start_at == 10_440.0

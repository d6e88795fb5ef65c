"""The fairness benchmark's bookkeeping on hand-made numbers: Jain's index, served fractions,
guarantees by demand, reclaim episodes, and the team column of the trace loaders."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.bench.fairness_metrics import (
    Run,
    TeamSample,
    jain_index,
    possible_service,
    reclaim_episodes,
    request_reclaim_times,
    served_fraction,
)
from scheduler.bench.team_guarantees import UNASSIGNED, guarantees_by_demand
from scheduler.sim.trace import TraceJob, load_trace


def test_jain_index_is_one_when_equal_and_one_over_n_when_one_team_gets_everything() -> None:
    assert jain_index([0.5, 0.5, 0.5]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    # (1 + 0.5)^2 / (2 * (1 + 0.25)) = 2.25 / 2.5
    assert jain_index([1.0, 0.5]) == pytest.approx(0.9)


def test_served_fraction_counts_only_service_before_the_window_end_and_caps_at_one() -> None:
    runs = [Run("a", 2.0, 0.0, 100.0), Run("a", 1.0, 150.0, 400.0), Run("b", 4.0, 0.0, 50.0)]
    got = served_fraction(runs, {"a": 500.0, "b": 100.0, "c": 10.0}, window_end=200.0)
    # a: 2*100 + 1*50 = 250 of 500; b: 200 of 100 capped; c: nothing served.
    assert got == {"a": pytest.approx(0.5), "b": 1.0, "c": 0.0}


def test_possible_service_counts_each_job_from_its_submit_to_the_window_end() -> None:
    jobs = [("a", 2.0, 0.0, 50.0), ("a", 1.0, 150.0, 1000.0), ("b", 4.0, 300.0, 10.0)]
    # a: 2*50 + 1*(200-150); b submitted after the window.
    assert possible_service(jobs, window_end=200.0) == {"a": 150.0}


def test_guarantees_follow_demand_and_the_rounding_remainder_goes_to_the_largest_fractions() -> None:
    jobs = [
        TraceJob("1", 0.0, 100.0, 1, team="a"),  # 100 GPU-s
        TraceJob("2", 0.0, 100.0, 2, team="b"),  # 200
        TraceJob("3", 0.0, 350.0, 2, team="c"),  # 700
        TraceJob("4", 0.0, 0.5, 1),  # unassigned, ~0
    ]
    # Exact shares of 10 GPUs: a 0.9995, b 1.999, c 6.9965, unassigned 0.005.
    assert guarantees_by_demand(jobs, 10) == {"a": 1, "b": 2, "c": 7, UNASSIGNED: 0}


def test_a_reclaim_episode_runs_from_the_ask_to_the_guarantee_and_open_ones_are_apart() -> None:
    g = {"a": 2000, "b": 2000}
    samples = [
        TeamSample(0.0, {"b": 4000}, {}),
        TeamSample(100.0, {"b": 4000}, {"a": [2000]}),  # a asks, holds 0 of 2
        TeamSample(110.0, {"b": 2000}, {"a": [2000]}),  # victims stopping
        TeamSample(130.0, {"a": 2000, "b": 2000}, {"b": [1000, 1000]}),  # a has its guarantee
        TeamSample(200.0, {"a": 2000, "b": 2000}, {"a": [3000]}),  # beyond its guarantee: not owed
        TeamSample(300.0, {"b": 1000}, {"a": [3000], "b": [1000]}),  # b owed: 1000 + 1000 <= 2000
        TeamSample(400.0, {"b": 1000}, {"a": [3000], "b": [1000]}),
    ]
    episodes = reclaim_episodes(samples, g)
    assert [(e.team, e.start, e.end, e.closed) for e in episodes] == [
        ("a", 100.0, 130.0, True),
        ("b", 300.0, 400.0, False),
    ]
    assert episodes[0].seconds == 30.0


def test_a_request_within_the_guarantee_is_timed_alone_while_the_teams_episode_spans_the_stream() -> None:
    g = {"a": 4000, "b": 4000}
    # Team a's three 1-GPU jobs arrive 20 s apart, each started 30 s after it asks (the grace): the
    # team stays owed from the first ask to the last start.
    samples = [
        TeamSample(0.0, {"b": 8000}, {}),
        TeamSample(100.0, {"b": 8000}, {"a": [1000]}),
        TeamSample(120.0, {"b": 7000}, {"a": [1000, 1000]}),
        TeamSample(130.0, {"a": 1000, "b": 7000}, {"a": [1000]}),
        TeamSample(140.0, {"a": 1000, "b": 6000}, {"a": [1000, 1000]}),
        TeamSample(150.0, {"a": 2000, "b": 6000}, {"a": [1000]}),
        TeamSample(170.0, {"a": 3000, "b": 5000}, {}),
    ]
    jobs = [
        ("a", 1000, 100.0, 130.0),
        ("a", 1000, 120.0, 150.0),
        ("a", 1000, 140.0, 170.0),
        ("a", 4000, 160.0, 400.0),  # a then holds 2 of 4: 2 + 4 > 4, beyond its guarantee
        ("b", 1000, 50.0, 60.0),  # b holds 8 of 4: borrowing, not asking within its guarantee
        ("a", 1000, 180.0, float("nan")),  # never started: not timed
    ]

    assert [(e.team, e.start, e.end) for e in reclaim_episodes(samples, g)] == [("a", 100.0, 170.0)]
    assert request_reclaim_times(samples, g, jobs) == [30.0, 30.0, 30.0]


def test_a_request_whose_own_team_fills_the_guarantee_first_is_served_when_the_guarantee_is() -> None:
    g = {"a": 2000}
    samples = [
        TeamSample(0.0, {}, {}),
        TeamSample(10.0, {}, {"a": [2000, 1000]}),
        TeamSample(40.0, {"a": 2000}, {"a": [1000]}),  # a's 2-GPU job went first: a has its 2
        TeamSample(900.0, {"a": 1000}, {}),
    ]
    # The 1-GPU job asked within the guarantee at 10 s and started at 900 s, behind its own team.
    jobs = [("a", 2000, 10.0, 40.0), ("a", 1000, 10.0, 900.0)]

    assert request_reclaim_times(samples, g, jobs) == [30.0, 30.0]


def test_traces_name_the_team_philly_by_virtual_cluster_and_itp_by_model(tmp_path: Path) -> None:
    philly = tmp_path / "philly.csv"
    philly.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,50.0,2,100.0,vcB\n")
    itp = tmp_path / "itp.csv"
    itp.write_text(
        "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"
        "j1,10,100,resnet50,20,64,1,30\n"
    )
    raw = tmp_path / "raw.csv"
    raw.write_text("job_id,submission_time,duration,num_gpu\nj1,10,30,1\n")
    assert [j.team for j in load_trace(philly).jobs] == ["vcB"]
    assert [j.team for j in load_trace(itp).jobs] == ["resnet50"]
    assert [j.team for j in load_trace(raw).jobs] == [""]

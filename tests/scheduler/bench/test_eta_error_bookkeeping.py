"""The ETA benchmark's bookkeeping on hand-made estimates, and the remaining-time estimator."""

from __future__ import annotations

import pytest

from scheduler.bench.eta_accuracy import eta_errors, shown_at
from scheduler.policy.eta import RuntimeHistory, order_statistic_ends


def test_the_estimate_shown_is_the_latest_made_by_then_and_the_first_before_any() -> None:
    made = [(10.0, 500.0), (60.0, 400.0), (120.0, None)]
    assert shown_at(made, 0.0) == 500.0
    assert shown_at(made, 59.0) == 500.0
    assert shown_at(made, 60.0) == 400.0
    assert shown_at(made, 500.0) is None


def test_errors_are_taken_at_each_tenth_of_the_wait_relative_to_the_wait() -> None:
    # Submitted at 0, started at 100 (wait 100). Estimates: 150 when it entered, 100 from t=50 on.
    estimates = {"j": [(0.0, 150.0), (50.0, 100.0)], "short": [(0.0, 5.0)], "blind": [(0.0, None)]}
    submit = {"j": 0.0, "short": 0.0, "blind": 0.0}
    start = {"j": 100.0, "short": 5.0, "blind": 200.0}
    got = eta_errors(estimates, submit, start, min_wait_s=60.0)
    # Tenths 0..4 (t = 0, 10, .., 40) show 150 (error 0.5); tenths 5..9 show 100 (error 0).
    assert got.errors == [0.5] * 5 + [0.0] * 5
    assert got.unknown == 10  # "blind": ten points without an estimate
    assert got.jobs == 2  # "short" waited less than min_wait_s


def test_remaining_time_comes_from_the_team_and_size_first_then_the_team_then_everyone() -> None:
    history = RuntimeHistory(conditional=False)
    assert history.remaining("a", 1) == (None, "guess")
    history.add("b", 4, 1000.0)
    assert history.remaining("a", 1) == (1000.0, "guess")
    history.add("a", 2, 300.0)
    assert history.remaining("a", 1) == (300.0, "history")
    history.add("a", 1, 100.0)
    history.add("a", 1, 200.0)
    assert history.remaining("a", 1, elapsed=50.0) == (pytest.approx(100.0), "history")  # median 150 - 50


def test_conditional_remaining_time_grows_with_the_time_already_run() -> None:
    history = RuntimeHistory(conditional=True)
    for seconds in (100.0, 100.0, 100.0, 1000.0, 5000.0):
        history.add("a", 1, seconds)
    # Median of d - 0 is 100; of the runs that outlived 200 s, the median beyond it is (800 + 4800) / 2.
    assert history.remaining("a", 1, elapsed=0.0) == (100.0, "history")
    assert history.remaining("a", 1, elapsed=200.0) == (pytest.approx(2800.0), "history")
    # Outlived every run known: expected to run as long again.
    assert history.remaining("a", 1, elapsed=6000.0) == (6000.0, "guess")


def test_the_users_runs_of_that_shape_come_before_the_teams_and_a_pool_nobody_outlived_gives_way() -> None:
    history = RuntimeHistory(conditional=True, min_runs=1)  # the pool order alone, no thin-pool guard
    history.add("a", 2, 100.0, user="ada", shape=("img", 2))
    history.add("a", 2, 900.0, user="bob", shape=("img", 2))
    history.add("a", 2, 5000.0)  # a trace run: no user, no shape
    assert history.remaining("a", 2, user="ada", shape=("img", 2)) == (100.0, "history")
    assert history.remaining("a", 2, user="cy", shape=("img", 2)) == (500.0, "history")  # the team's shape
    assert history.remaining("a", 2, user="cy", shape=("other", 2)) == (900.0, "history")  # by GPU count
    # Ada's one run ended at 100 s and the team's shape pool at 900 s: at 950 s only the GPU-count pool
    # has a run that outlived it.
    assert history.remaining("a", 2, 950.0, user="ada", shape=("img", 2)) == (4050.0, "history")


def test_a_pool_with_fewer_than_min_runs_survivors_gives_way_to_a_wider_pool_that_has_them() -> None:
    history = RuntimeHistory(conditional=True, min_runs=5)
    for seconds in (1000.0, 1100.0, 1200.0, 1300.0, 1400.0):
        history.add("a", 4, seconds)  # the team's runs of another size: 5 runs
    for seconds in (100.0, 90_000.0):
        history.add("a", 8, seconds)  # the team's 8-GPU runs: one long outlier outlived 500 s
    # Only the outlier outlived 500 s in the 8-GPU pool; the team's pool has 5 runs beyond it
    # (500, 600, 700, 800, 900 s and 89,500 s: six, median (700 + 800) / 2), so it gives the estimate.
    assert history.remaining("a", 8, elapsed=500.0) == (pytest.approx(750.0), "history")
    # Without the guard the one outlier's remainder is the estimate.
    unguarded = RuntimeHistory(conditional=True, min_runs=1)
    unguarded.pools = history.pools
    assert unguarded.remaining("a", 8, elapsed=500.0) == (pytest.approx(89_500.0), "history")


def test_when_every_pool_is_thin_the_one_with_most_survivors_gives_the_estimate() -> None:
    history = RuntimeHistory(conditional=True, min_runs=5)
    history.add("b", 1, 400.0)
    history.add("b", 1, 600.0)
    history.add("b", 1, 800.0)
    history.add("a", 2, 10_000.0)  # team a's only run
    # At 300 s no pool has 5 survivors. Everyone's has 4 (100, 300, 500 and 9,700 s beyond it, a
    # median of 400 s), team a's 1 (9,700 s): everyone's gives the estimate, with its source, a guess.
    assert history.remaining("a", 2, elapsed=300.0) == (pytest.approx(400.0), "guess")
    # At 9,000 s only the 10,000 s run outlived it, in team a's pools and in everyone's alike: a tie
    # goes to the most specific pool, whose source is history.
    assert history.remaining("a", 2, elapsed=9000.0) == (pytest.approx(1000.0), "history")


def test_a_job_that_outlived_every_run_is_given_a_pareto_tail_whose_median_is_the_time_run() -> None:
    history = RuntimeHistory(conditional=True)
    history.add("a", 1, 100.0)
    found, source = history.remainders("a", 1, elapsed=600.0)
    assert source == "guess" and found is not None
    assert found[0] == pytest.approx(600.0 / 19) and found[-1] == pytest.approx(600.0 * 19)  # q = 1/20, 19/20
    assert history.remaining("a", 1, elapsed=600.0) == (pytest.approx(600.0), "guess")
    assert RuntimeHistory().remainders("a", 1, elapsed=600.0) == (None, "guess")  # nothing known


def test_one_running_job_ends_at_its_own_conditional_median() -> None:
    assert order_statistic_ends({"j": [100.0, 300.0, 800.0]}) == {"j": 300.0}


def test_alike_jobs_end_at_the_medians_of_their_order_statistics_not_all_at_their_own_median() -> None:
    # Four jobs, each equally likely to have 100, 200, ..., 1,000 s left (own median 550). The expected
    # number of ends by t is 4 F(t): 0.8 at 200 (>= 0.5: the first end), 1.6 at 400 (>= 1.5), 2.8 at
    # 700 (>= 2.5) and 3.6 at 900 (>= 3.5). Ties go to the job listed first.
    alike = [100.0 * i for i in range(1, 11)]
    found = order_statistic_ends({name: alike for name in "abcd"})
    assert found == {"a": 200.0, "b": 400.0, "c": 700.0, "d": 900.0}


def test_the_first_end_goes_to_the_job_most_likely_to_have_ended_and_unknown_ones_never_end() -> None:
    # By 20 s the short job has ended with probability 2/3 (expected ends 2/3 >= 0.5), the long one 0;
    # the second end needs 1.5 expected ends, reached at 2,000 s, the long job's own median.
    found = order_statistic_ends({"long": [1000.0, 2000.0, 3000.0], "short": [10.0, 20.0, 30.0], "x": None})
    assert found == {"short": 20.0, "long": 2000.0, "x": None}


def test_dated_ends_are_rounded_to_a_geometric_grid_within_half_its_step() -> None:
    # The grid of ratio 1.1 near 1,000 s: 1.1^72 = 955.6 and 1.1^73 = 1,051.2; 1,000 is nearer the first.
    found = order_statistic_ends({"j": [1000.0], "k": [0.5]}, resolution=0.1)
    assert found["j"] == pytest.approx(1.1**72) and found["k"] == 0.5  # under a second: unchanged
    assert order_statistic_ends({"j": [1000.0]}, resolution=0.1, exact={"j"}) == {"j": 1000.0}

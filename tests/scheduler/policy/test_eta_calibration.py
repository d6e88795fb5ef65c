"""RuntimeHistory(calibrate=True): expected times scaled by how wrong the same estimate was on the
completed runs themselves (each left out of its pools and re-estimated during its life)."""

from __future__ import annotations

import math

import pytest

from scheduler.policy import eta
from scheduler.policy.eta import RuntimeHistory


def test_runs_of_one_length_are_estimated_exactly_so_calibration_changes_nothing() -> None:
    plain, calibrated = RuntimeHistory(), RuntimeHistory(calibrate=True)
    for history in (plain, calibrated):
        for _ in range(10):
            history.add("a", 1, 1000.0)

    assert calibrated.factors() == {("history", "pool"): pytest.approx(1.0)}
    assert calibrated.remainders("a", 1, 400.0) == plain.remainders("a", 1, 400.0)


def test_a_hand_computed_backtest_scales_the_pool_estimate_by_its_length_weighted_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One re-estimate per run, at half its life; every kind counts from one estimate.
    monkeypatch.setattr(eta, "CALIBRATION_POINTS", 1)
    monkeypatch.setattr(eta, "CALIBRATION_MIN", 1)
    history = RuntimeHistory(calibrate=True, min_runs=1)
    history.add("a", 1, 100.0)
    history.add("a", 1, 300.0)

    # The 100 s run at 50 s, left out: the pool is [300], 250 s left estimated, 50 s true: x0.2.
    # The 300 s run at 150 s, left out: [100] did not outlive it, the tail says 150 s, true 150 s: x1.
    factors = history.factors()
    assert factors[("history", "pool")] == pytest.approx(0.2)
    assert factors[("guess", "tail")] == pytest.approx(1.0)
    found, source = history.remainders("a", 1, 0.0)
    assert (found, source) == (pytest.approx([20.0, 60.0]), "history")
    assert history.remaining("a", 1, 0.0) == (pytest.approx(40.0), "history")


def test_a_kind_with_too_few_backtested_estimates_is_left_unscaled() -> None:
    history = RuntimeHistory(calibrate=True, min_runs=1)
    history.add("a", 1, 100.0)
    history.add("a", 1, 300.0)

    assert history.factors() == {}  # 8 estimates in all, fewer than CALIBRATION_MIN of any kind
    assert history.remainders("a", 1, 0.0) == ([100.0, 300.0], "history")


def test_a_new_run_invalidates_the_factors() -> None:
    history = RuntimeHistory(calibrate=True)
    for _ in range(10):
        history.add("a", 1, 1000.0)
    assert math.isclose(history.factors()[("history", "pool")], 1.0)
    for _ in range(10):
        history.add("a", 1, 900.0)

    # Half the runs now last 900 s: re-estimated, a 1,000 s run is given the mixed median, too short.
    assert history.factors()[("history", "pool")] > 1.0

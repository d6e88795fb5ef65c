"""Learning from own co-location measurements: the correction, the reveal bookkeeping, the command."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from scheduler.__main__ import main
from scheduler.interference.datasets import PairRecord
from scheduler.interference.online import (
    OnlineConfig,
    OnlinePredictor,
    ResidualCorrection,
    default_fit,
    family_pair_split,
    reveal_order,
    run_online,
    run_split,
    score,
)
from tests.scheduler.interference.interference_helpers import write_gavel_format

LINEAR = default_fit(0, "linear")
PENALISED = "lucid:alpha|beta"


def _penalised(records: list[PairRecord], factor: float = 0.55) -> list[PairRecord]:
    """The synthetic law, except that one family pair interferes far more than its profiles say."""
    return [
        dataclasses.replace(r, norm_a=r.norm_a * factor, norm_b=r.norm_b * factor)
        if r.group == PENALISED
        else r
        for r in records
    ]


def _record(fa: str, fb: str, ya: float, yb: float, gpu: str = "v100", feasible: bool = True) -> PairRecord:
    return PairRecord(
        dataset="gavel",
        gpu_type=gpu,
        profile_a={"job_key": f"{fa}-job", "model_family": fa},
        profile_b={"job_key": f"{fb}-job", "model_family": fb},
        feasible=feasible,
        norm_a=ya,
        norm_b=yb,
    )


def test_the_correction_is_the_shrunk_mean_residual_of_the_ordered_family_pair() -> None:
    correction = ResidualCorrection(shrink=(1.0, 1e12, 1e12))
    correction.add(_record("A", "B", 0.5, 0.9), (0.3, 0.9), 1.0)
    correction.add(_record("A", "B", 0.6, 0.8), (0.4, 0.9), 1.0)
    other_job = {"job_key": "A-other", "model_family": "A"}
    dy_ab, _ = correction.offsets(other_job, {"model_family": "B"}, "k80")
    dy_ba, _ = correction.offsets({"model_family": "B"}, other_job, "k80")
    assert dy_ab == pytest.approx((0.2 + 0.2) / (2 + 1))
    assert dy_ba == pytest.approx((0.0 - 0.1) / (2 + 1))
    assert correction.offsets({"model_family": "C"}, other_job, "k80") == (0.0, 0.0)


def test_an_infeasible_measurement_moves_the_feasibility_of_its_pair_but_not_its_throughput() -> None:
    correction = ResidualCorrection(shrink=(1.0, 1.0, 1.0))
    correction.add(_record("A", "B", float("nan"), float("nan"), feasible=False), (0.5, 0.5), 0.9)
    dy, dp = correction.offsets({"job_key": "A-job", "model_family": "A"}, {"model_family": "B"}, "v100")
    assert dy == 0.0
    assert dp < -0.4


def test_each_round_reveals_one_more_measurement_of_every_held_out_pair_that_has_one_left() -> None:
    held = [_record("A", "B", 0.5, 0.5)] + [_record("C", "D", 0.5, 0.5) for _ in range(3)]
    rounds = reveal_order(held, max_per_pair=5, seed=1)
    assert [len(r) for r in rounds] == [2, 1, 1]
    assert sorted(i for r in rounds for i in r) == [0, 1, 2, 3]
    assert [len(r) for r in reveal_order(held, max_per_pair=2, seed=1)] == [2, 1]


def test_a_split_holds_out_whole_family_pairs(records: list[PairRecord]) -> None:
    base, held = family_pair_split(records, 0.2, seed=3)
    assert not set(base) & set(held)
    assert len(held) == round(0.2 * len(set(base) | set(held)))


def test_the_curve_scores_only_rows_not_yet_revealed_and_retrains_every_k(records: list[PairRecord]) -> None:
    held_groups = {"lucid:alpha|beta", "lucid:gamma|gamma"}  # 9 and 6 pairs
    base = [r for r in records if r.group not in held_groups]
    held = [r for r in records if r.group in held_groups]
    result = run_split(base, held, OnlineConfig(max_per_pair=7, retrain_every=4), LINEAR)
    curve = result["curve"]
    assert [p["measurements_per_pair"] for p in curve] == list(range(8))
    revealed = [0, 2, 4, 6, 8, 10, 12, 13]  # gamma|gamma runs out after 6 rounds
    assert [p["measurements"] for p in curve] == revealed
    assert [p["pairs"] for p in curve] == [len(held) - n for n in revealed]
    assert [p["retrains"] for p in curve] == [n // 4 for n in revealed]


def test_measurements_of_an_unseen_family_pair_correct_a_model_that_is_biased_on_it(
    records: list[PairRecord],
) -> None:
    data = _penalised(records)
    base = [r for r in data if r.group != PENALISED]
    held = [r for r in data if r.group == PENALISED]
    curve = run_split(base, held, OnlineConfig(max_per_pair=4, retrain_every=0), LINEAR)["curve"]
    assert curve[0]["mae"] == pytest.approx(curve[0]["static_mae"])
    assert curve[-1]["mae"] < 0.5 * curve[-1]["static_mae"]
    assert curve[-1]["static_mae"] > 0.15  # the bias was real


def test_a_predictor_without_the_correction_learns_only_by_retraining(records: list[PairRecord]) -> None:
    data = _penalised(records)
    base = [r for r in data if r.group != PENALISED]
    held = [r for r in data if r.group == PENALISED]
    predictor = OnlinePredictor(base=base, fit=LINEAR, correct=False)
    before, _ = predictor.predict(held)
    for r in held[:3]:
        predictor.observe(r)
    after, _ = predictor.predict(held)
    assert np.array_equal(before, after)
    assert len(predictor.own) == 3 and predictor.retrains == 1


def test_the_score_counts_infeasible_pairs_as_right_when_not_packed() -> None:
    recs = [_record("A", "B", 0.7, 0.6), _record("A", "C", float("nan"), float("nan"), feasible=False)]
    # Pack the first (0.7 + 0.6 > 1), not the second (infeasible).
    s = score(recs, np.array([0.65, 0.65, 0.9, 0.9]), np.array([0.9, 0.9, 0.1, 0.1]))
    assert s["pack_accuracy"] == 1.0 and s["always_pack_accuracy"] == 0.5
    assert s["entries"] == 2 and s["mae"] == pytest.approx((0.05 + 0.05) / 2)


def test_the_benchmark_averages_its_splits_into_final_and_curve(records: list[PairRecord]) -> None:
    report = run_online(records, OnlineConfig(max_per_pair=2, retrain_every=0), splits=2, fit=LINEAR)
    assert len(report["splits"]) == 2
    assert report["splits"][0]["groups"] != report["splits"][1]["groups"]
    final = report["final"]
    assert final["measurements_per_pair"] == 2
    mean = np.mean([s["curve"][2]["mae"] for s in report["splits"]])
    assert final["mae"] == pytest.approx(mean)


@pytest.fixture
def data_dir(tmp_path: Path, records: list[PairRecord]) -> Path:
    data = _penalised(records)
    root = tmp_path / "data"
    write_gavel_format(
        root / "interference" / "gavel" / "gavel_pairs_single_gpu.csv",
        [r for r in data if r.group != PENALISED],
    )
    write_gavel_format(tmp_path / "reveal.csv", [r for r in data if r.group == PENALISED])
    return root


def test_the_command_reveals_a_given_csv_and_writes_final_curve_and_plot(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, plot = tmp_path / "online.json", tmp_path / "online.png"
    argv = ["interference", "online", "--data", str(data_dir), "--reveal", str(tmp_path / "reveal.csv")]
    argv += ["--estimator", "linear", "--max-per-pair", "4", "--json", str(out), "--plot", str(plot)]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert set(report["final"]) >= {"mae", "pack_accuracy", "always_pack_accuracy", "measurements_per_pair"}
    assert report["final"]["measurements_per_pair"] == 4
    assert [s["groups"] for s in report["splits"]] == [["gavel:alpha|beta"]]
    assert report["final"]["mae"] < report["final"]["static_mae"]
    assert plot.stat().st_size > 0
    assert "after 4 measurements per unseen family pair" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--splits", "0"], "--splits must be at least 1"),
        (["--retrain-every", "-1"], "--retrain-every must be 0"),
        (["--fraction", "1.5"], "--fraction must be between 0 and 1"),
        (["--reveal", "/nonexistent.csv"], "test file not found"),
        (["--shrink", "2,4"], "--shrink must be three numbers"),
    ],
)
def test_the_command_refuses_bad_arguments_in_one_line(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    argv = ["interference", "online", "--data", str(data_dir), "--json", str(tmp_path / "o.json"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err

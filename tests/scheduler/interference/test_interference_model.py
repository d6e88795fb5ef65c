"""The learnt model: it learns the co-location law, generalises to unseen family pairs, persists."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scheduler.bench.interference.evaluate import cross_validate, metrics
from scheduler.interference.datasets import PairRecord
from scheduler.interference.models import InterferenceModel, pack_decision
from scheduler.interference.predict import SetQuery, predict_sets
from scheduler.interference.store import (
    MODEL_DIR_ENV,
    ModelError,
    cached_model,
    default_model_path,
    load_model,
    save_model,
)


def test_predictions_are_normalised_throughputs_in_the_unit_interval(
    trained_model: InterferenceModel, records: list[PairRecord]
) -> None:
    y, yq, p = trained_model.predict_records(records)
    assert np.all((y > 0) & (y <= 1)) and np.all(yq <= y + 1e-12)
    assert np.all((p >= 0) & (p <= 1))


def test_grouped_cross_validation_beats_predicting_the_mean(records: list[PairRecord]) -> None:
    y, yq, p = cross_validate(records, "gradient_boosting", folds=3, extras=False)
    m = metrics(records, y, yq, p)["lucid"]
    truth = np.array([min(1.0, v) for r in records for v in (r.norm_a, r.norm_b)])
    baseline = float(np.mean(np.abs(truth - truth.mean())))
    assert m["mae"] < 0.5 * baseline
    assert m["r2"] > 0.5


def test_a_new_job_known_only_by_its_profile_is_predicted_from_the_profile(
    trained_model: InterferenceModel,
) -> None:
    light = {"gpu_util": 30.0, "mem_util": 10.0, "gpu_memory_mib": 2000.0, "batch_size": 32.0}
    heavy = {"gpu_util": 95.0, "mem_util": 60.0, "gpu_memory_mib": 4000.0, "batch_size": 128.0}
    preds = predict_sets(
        trained_model,
        [SetQuery([light, dict(light)], "rtx3090"), SetQuery([heavy, dict(heavy)], "rtx3090")],
    )
    assert preds[0].source == preds[1].source == "model"
    assert preds[0].slowdowns[0] < preds[1].slowdowns[0]


def test_without_a_model_every_pair_uses_the_analytic_estimate() -> None:
    (pred,) = predict_sets(None, [SetQuery([{"gpu_util": 90.0}, {"gpu_util": 90.0}, {"gpu_util": 90.0}])])
    assert pred.source == "analytic"
    assert pred.slowdowns.shape == (3,) and np.all(pred.slowdowns > 2.0)


def test_a_set_that_overflows_gpu_memory_is_infeasible() -> None:
    big = {"gpu_util": 20.0, "gpu_memory_mib": 9000.0}
    (pred,) = predict_sets(None, [SetQuery([big, dict(big)], "v100", gpu_memory_mib=16384)])
    assert pred.p_feasible == 0.0


def test_packing_pays_only_when_the_pair_runs_and_beats_taking_turns() -> None:
    decided = pack_decision(
        np.array([0.6, 0.4, 0.9]), np.array([0.6, 0.5, 0.9]), np.array([True, True, False])
    )
    assert decided.tolist() == [True, False, False]


def test_a_saved_model_loads_back_and_predicts_the_same(
    tmp_path: Path, trained_model: InterferenceModel, records: list[PairRecord]
) -> None:
    path = save_model(trained_model, tmp_path / "m.joblib")
    again = load_model(path)
    assert np.allclose(again.predict_records(records[:10])[0], trained_model.predict_records(records[:10])[0])


def test_the_model_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path))
    assert default_model_path() == tmp_path / "interference.joblib"


def test_an_unusable_model_file_is_one_clear_error_and_no_model_for_the_scheduler(tmp_path: Path) -> None:
    bad = tmp_path / "bad.joblib"
    bad.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="cannot read model"):
        load_model(bad)
    model, note = cached_model(bad)
    assert model is None and "cannot read model" in note
    assert cached_model(tmp_path / "absent.joblib") == (
        None,
        f"no trained model at {tmp_path / 'absent.joblib'}",
    )


def test_only_permissively_licensed_training_data_makes_a_platform_model(records: list[PairRecord]) -> None:
    assert InterferenceModel.fit(records[:60], extras=False).research_only  # synthetic rows are tagged lucid

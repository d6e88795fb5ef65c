"""The compiled forest gives scikit-learn's predictions bit for bit (issue 23)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

from scheduler.interference import forest


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(400, 5))
    y = np.sin(x[:, 0]) + x[:, 1] * x[:, 2] + rng.normal(scale=0.1, size=400)
    x[rng.random(x.shape) < 0.15] = np.nan  # missing values take the side each split learnt
    return x, y


def _queries(model: forest.CompiledForest, n: int = 300) -> np.ndarray:
    rng = np.random.default_rng(1)
    q = rng.normal(size=(n, model.n_features)) * 2
    q[rng.random(q.shape) < 0.2] = np.nan
    # Values exactly on thresholds exercise the `<=` of every split.
    for j in range(model.n_features):
        thresholds = model.threshold[(model.feature == j) & ~model.leaf][:n]
        q[: thresholds.size, j] = thresholds
    return q


@pytest.mark.parametrize("loss", ["squared_error", "quantile"])
def test_regressor_predictions_are_identical_to_sklearn(loss: str) -> None:
    x, y = _data()
    kwargs = {"quantile": 0.9} if loss == "quantile" else {}
    est = HistGradientBoostingRegressor(loss=loss, max_iter=40, random_state=0, **kwargs).fit(x, y)
    compiled = forest.CompiledForest(est)
    q = _queries(compiled)
    for rows in (q[:1], q[:3], q):
        assert np.array_equal(forest.predict(est, rows), est.predict(rows))


def test_classifier_probabilities_are_identical_to_sklearn() -> None:
    x, y = _data(2)
    est = HistGradientBoostingClassifier(max_iter=40, random_state=0).fit(x, (y > 0).astype(int))
    q = _queries(forest.CompiledForest(est))
    assert np.array_equal(forest.predict_proba(est, q), est.predict_proba(q))


def test_categorical_models_are_left_to_sklearn() -> None:
    rng = np.random.default_rng(3)
    x = np.column_stack([rng.integers(0, 4, 300), rng.normal(size=300)]).astype(float)
    y = (x[:, 0] == 2) * 3.0 + x[:, 1]
    est = HistGradientBoostingRegressor(max_iter=20, categorical_features=[0], random_state=0).fit(x, y)
    assert not forest.compilable(est)
    assert np.array_equal(forest.predict(est, x[:50]), est.predict(x[:50]))


def test_rows_of_the_wrong_width_are_refused() -> None:
    x, y = _data()
    compiled = forest.CompiledForest(HistGradientBoostingRegressor(max_iter=5).fit(x, y))
    with pytest.raises(ValueError, match="expected 5 features"):
        compiled.raw_predict(np.zeros((2, 4)))

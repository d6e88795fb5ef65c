"""Exact, vectorised evaluation of a fitted scikit-learn ``HistGradientBoosting*`` model.

scikit-learn walks its trees one Python call per tree (``_predict_iterations``), which for the
scheduler's small batches (a few rows, about a hundred trees per model, three models) costs far more
than the walk itself. ``CompiledForest`` stacks every tree's nodes into flat arrays once and walks all
trees for all rows together, one numpy step per tree level.

The result is bit-for-bit scikit-learn's: the same float64 comparisons (``x <= threshold``, NaN to
the side the tree learnt), the same leaf values, added to the baseline one tree at a time in the
same order, then the estimator's own inverse link or ``predict_proba``. Models it cannot reproduce
exactly (categorical splits, more than one tree per iteration) are left to scikit-learn.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class CompiledForest:
    """The trees of one fitted estimator as flat node arrays (see the module docstring)."""

    def __init__(self, estimator: Any) -> None:
        predictors = [iteration[0] for iteration in estimator._predictors]
        sizes = [len(p.nodes) for p in predictors]
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
        nodes = np.concatenate([p.nodes for p in predictors])
        shift = np.repeat(offsets, sizes)
        self.roots = offsets
        self.leaf = nodes["is_leaf"].astype(bool)
        self.feature = nodes["feature_idx"].astype(np.intp)
        self.threshold = nodes["num_threshold"].astype(np.float64)
        self.missing_left = nodes["missing_go_to_left"].astype(bool)
        # Children as global node indices; a leaf points at itself so the walk can stop there.
        here = np.arange(len(nodes), dtype=np.intp)
        self.left = np.where(self.leaf, here, nodes["left"].astype(np.intp) + shift)
        self.right = np.where(self.leaf, here, nodes["right"].astype(np.intp) + shift)
        self.value = nodes["value"].astype(np.float64)
        self.depth = max(int(p.get_max_depth()) for p in predictors)
        self.baseline = np.asarray(estimator._baseline_prediction, dtype=np.float64).reshape(-1)
        self.n_features = int(estimator.n_features_in_)

    def raw_predict(self, x: np.ndarray) -> np.ndarray:
        """``estimator._raw_predict(x)``: shape (rows, 1), float64."""
        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(f"expected {self.n_features} features, got shape {x.shape}")
        n = x.shape[0]
        rows = np.arange(n, dtype=np.intp)[:, None]
        node = np.broadcast_to(self.roots, (n, self.roots.size)).copy()
        for _ in range(self.depth):
            active = ~self.leaf[node]
            if not active.any():
                break
            data = x[rows, self.feature[node]]
            go_left = np.where(np.isnan(data), self.missing_left[node], data <= self.threshold[node])
            node = np.where(go_left, self.left[node], self.right[node])
        values = self.value[node]
        raw = np.zeros((n, 1), dtype=np.float64, order="F")
        raw += self.baseline
        column = raw[:, 0]
        # One tree at a time, in scikit-learn's order: float addition is not associative.
        for t in range(values.shape[1]):
            column += values[:, t]
        return raw


def compilable(estimator: Any) -> bool:
    """Whether ``CompiledForest`` reproduces the estimator exactly (numeric splits, one tree per
    iteration, fitted)."""
    predictors = getattr(estimator, "_predictors", None)
    if not predictors or getattr(estimator, "n_trees_per_iteration_", None) != 1:
        return False
    categorical = getattr(estimator, "is_categorical_", None)
    if categorical is not None and np.asarray(categorical).any():
        return False
    return all(
        len(iteration) == 1 and not iteration[0].nodes["is_categorical"].any() for iteration in predictors
    )


_compiled: dict[int, tuple[Any, CompiledForest | None]] = {}


def _forest(estimator: Any) -> CompiledForest | None:
    entry = _compiled.get(id(estimator))
    # The entry holds the estimator itself, so its id cannot be reused while the entry lives.
    if entry is None or entry[0] is not estimator:
        entry = (estimator, CompiledForest(estimator) if compilable(estimator) else None)
        if len(_compiled) > 64:
            _compiled.clear()
        _compiled[id(estimator)] = entry
    return entry[1]


def predict(estimator: Any, x: np.ndarray) -> np.ndarray:
    """``estimator.predict(x)`` for a regressor, through the compiled forest where it is exact."""
    forest = _forest(estimator)
    if forest is None:
        return np.asarray(estimator.predict(x))
    return np.asarray(estimator._loss.link.inverse(forest.raw_predict(x).ravel()))


def predict_proba(estimator: Any, x: np.ndarray) -> np.ndarray:
    """``estimator.predict_proba(x)`` for a classifier, through the compiled forest where it is exact."""
    forest = _forest(estimator)
    if forest is None:
        return np.asarray(estimator.predict_proba(x))
    return np.asarray(estimator._loss.predict_proba(forest.raw_predict(x)))

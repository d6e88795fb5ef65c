"""Nested, grouped cross-validation of ways to make the pack / don't-pack decision.

Truth per unordered pair: pack iff the pair ran and ``y_A + y_B > 1`` (``models.pack_decision``).
Candidates (all pair-symmetric; ``p`` = feasibility probability, ``S = y_hat_A + y_hat_B``):

* ``rule`` -- the shipped decision: ``p >= 0.5 and S > 1`` (no parameter);
* ``rule_tuned`` -- ``p >= t_p and S > t_s``, ``t_p`` in 0.30..0.75, ``t_s`` in 0.90..1.10;
* ``stack`` -- logistic regression on (S, logit p, |y_A - y_B|, min y, conservative sum), at 0.5 and
  at a threshold ``stack_thr`` chosen by a further grouped 3-fold CV of the stacker;
* ``direct`` -- a gradient-boosting classifier trained on the pack label itself, features of both
  orders combined (``(x_AB + x_BA) / 2`` and ``|x_AB - x_BA|``, out-of-group fingerprints), at 0.5
  and at an inner-CV threshold ``direct_thr``;
* ``stack_direct`` -- the stacker with the direct classifier's logit as one more input.

Nesting: the outer loop is the evaluation's ``GroupKFold`` over model-family pairs. Inside each
outer training fold, an inner 3-fold ``GroupKFold`` produces out-of-fold S, p and direct-classifier
probabilities for the training pairs; every threshold and stacker is fitted on those alone, and the
candidate with the best inner accuracy is ``selected`` for that outer fold. The outer test fold is
only scored. Accuracy is reported over all pairs (infeasible pairs count; never packing them is
right) and over feasible pairs only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from scheduler.interference.datasets import PairRecord
from scheduler.interference.features import Fingerprints, ordered_table
from scheduler.interference.models import InterferenceModel, pack_decision

THRESHOLDS = np.round(np.arange(0.3, 0.71, 0.025), 3)


def pack_truth(records: Sequence[PairRecord]) -> np.ndarray:
    t = ordered_table(records)
    return pack_decision(t.y[0::2], t.y[1::2], t.feasible[0::2])


def _regression_features(model: InterferenceModel, records: Sequence[PairRecord]) -> np.ndarray:
    y, yq, p = model.predict_records(records)
    ya, yb = y[0::2], y[1::2]
    return np.column_stack([ya + yb, p[0::2], np.abs(ya - yb), np.minimum(ya, yb), yq[0::2] + yq[1::2]])


def _symmetric(records: Sequence[PairRecord], fp: Fingerprints, out_of_group: bool) -> np.ndarray:
    t = ordered_table(records, fp, out_of_group=out_of_group)
    a, b = t.x[0::2], t.x[1::2]
    return np.hstack([(a + b) / 2, np.abs(a - b)])


def _direct(seed: int) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(
        max_iter=150, learning_rate=0.05, min_samples_leaf=10, random_state=seed
    )


def _direct_proba(train: Sequence[PairRecord], test: Sequence[PairRecord], seed: int) -> np.ndarray:
    fp = Fingerprints.fit(train)
    x_train = _symmetric(train, fp, True)
    keep = ~np.all(np.isnan(x_train), axis=0)
    clf = _direct(seed).fit(x_train[:, keep], pack_truth(train))
    return np.asarray(clf.predict_proba(_symmetric(test, fp, False)[:, keep])[:, 1])


def _logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-3, 1 - 1e-3)
    return np.log(q / (1 - q))


def _stack_features(f: np.ndarray, direct: np.ndarray | None = None) -> np.ndarray:
    cols = [f[:, 0], _logit(f[:, 1]), f[:, 2], f[:, 3], f[:, 4]]
    if direct is not None:
        cols.append(_logit(direct))
    return np.column_stack(cols)


def _stacker() -> Any:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=1000))


def _best_threshold(score: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    acc = [float(np.mean((score >= t) == truth)) for t in THRESHOLDS]
    i = int(np.argmax(acc))
    return float(THRESHOLDS[i]), acc[i]


def _inner_oof(
    records: Sequence[PairRecord], folds: int, seed: int, fit: Callable[..., InterferenceModel]
) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.model_selection import GroupKFold

    groups = np.array([r.group for r in records])
    f = np.zeros((len(records), 5))
    d = np.zeros(len(records))
    for tr, te in GroupKFold(n_splits=min(folds, len(set(groups)))).split(groups, groups=groups):
        train, test = [records[i] for i in tr], [records[i] for i in te]
        f[te] = _regression_features(fit(train, seed=seed), test)
        d[te] = _direct_proba(train, test, seed)
    return f, d


def _candidates(
    f: np.ndarray, d: np.ndarray, truth: np.ndarray, groups: np.ndarray, ft: np.ndarray, dt: np.ndarray
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Inner accuracy of each candidate (training pairs, out of fold) and its test-fold decisions."""
    from sklearn.model_selection import GroupKFold

    inner: dict[str, float] = {}
    test: dict[str, np.ndarray] = {}
    inner["rule"] = float(np.mean(((f[:, 1] >= 0.5) & (f[:, 0] > 1.0)) == truth))
    test["rule"] = (ft[:, 1] >= 0.5) & (ft[:, 0] > 1.0)
    best = (0.5, 1.0, -1.0)
    for tp in np.arange(0.3, 0.76, 0.05):
        for ts in np.arange(0.9, 1.101, 0.01):
            acc = float(np.mean(((f[:, 1] >= tp) & (f[:, 0] > ts)) == truth))
            if acc > best[2] + 1e-12:
                best = (float(tp), float(ts), acc)
    inner["rule_tuned"] = best[2]
    test["rule_tuned"] = (ft[:, 1] >= best[0]) & (ft[:, 0] > best[1])
    for name, xs, xt in (
        ("stack", _stack_features(f), _stack_features(ft)),
        ("stack_direct", _stack_features(f, d), _stack_features(ft, dt)),
    ):
        oof = np.zeros(truth.size)
        for tr, te in GroupKFold(n_splits=min(3, len(set(groups)))).split(xs, groups=groups):
            oof[te] = _stacker().fit(xs[tr], truth[tr]).predict_proba(xs[te])[:, 1]
        score = _stacker().fit(xs, truth).predict_proba(xt)[:, 1]
        inner[name] = float(np.mean((oof >= 0.5) == truth))
        test[name] = score >= 0.5
        thr, inner[f"{name}_thr"] = _best_threshold(oof, truth)
        test[f"{name}_thr"] = score >= thr
    inner["direct"] = float(np.mean((d >= 0.5) == truth))
    test["direct"] = dt >= 0.5
    thr, inner["direct_thr"] = _best_threshold(d, truth)
    test["direct_thr"] = dt >= thr
    return inner, test


def nested_pack_study(
    records: Sequence[PairRecord],
    folds: int = 5,
    inner_folds: int = 3,
    seed: int = 0,
    fit: Callable[..., InterferenceModel] = InterferenceModel.fit,
) -> dict[str, Any]:
    """Outer-fold accuracy of every candidate and of the inner-CV ``selected`` one (module docstring)."""
    from sklearn.model_selection import GroupKFold

    groups = np.array([r.group for r in records])
    truth = pack_truth(records)
    feasible = np.array([r.feasible for r in records])
    decisions: dict[str, np.ndarray] = {}
    chosen: list[dict[str, Any]] = []
    for tr, te in GroupKFold(n_splits=min(folds, len(set(groups)))).split(groups, groups=groups):
        train, test = [records[i] for i in tr], [records[i] for i in te]
        f, d = _inner_oof(train, inner_folds, seed, fit)
        ft = _regression_features(fit(train, seed=seed), test)
        dt = _direct_proba(train, test, seed)
        inner, out = _candidates(f, d, truth[tr], groups[tr], ft, dt)
        pick = max(inner, key=lambda k: inner[k])
        out["selected"] = out[pick]
        for name, dec in out.items():
            decisions.setdefault(name, np.zeros(len(records), dtype=bool))[te] = dec
        chosen.append(
            {
                "selected": pick,
                "inner_accuracy": inner,
                "test_accuracy": {k: float(np.mean(v == truth[te])) for k, v in out.items()},
            }
        )

    def acc(pred: np.ndarray) -> dict[str, float]:
        return {
            "all_pairs": float(np.mean(pred == truth)),
            "feasible_pairs": float(np.mean(pred[feasible] == truth[feasible])),
        }

    return {
        "pairs": len(records),
        "feasible_pairs": int(feasible.sum()),
        "always_pack": {
            "all_pairs": float(np.mean(truth)),
            "feasible_pairs": float(np.mean(truth[feasible])) if feasible.any() else float("nan"),
        },
        "candidates": {name: acc(pred) for name, pred in decisions.items()},
        "folds": chosen,
    }

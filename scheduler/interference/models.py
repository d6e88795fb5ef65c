"""The learnt interference model: regressor, conservative quantile model and feasibility classifier.

* **regressor**: ordered pair features -> normalised co-located throughput ``y`` of the first job,
  clipped to [0.01, 1] (slowdown ``s = 1 / y``);
* **quantile model**: the ``alpha``-quantile of ``y`` (default 0.1, i.e. the 90th percentile of the
  slowdown) from gradient boosting with the pinball loss, shifted by a grouped conformal correction
  (``conformal_shift``) so that it covers unseen pairs, for conservative admission;
* **classifier**: probability that the pair can run together at all (Gavel records OOM pairs as 0);
  the probability of an unordered pair is the mean of its two orders.

Training rows carry *out-of-group* fingerprints (see ``features.ordered_table``). The regressor for rows
with fingerprints (jobs measured with other partners) is fitted on them; a second regressor is fitted
on the same rows with fingerprints blanked and serves brand-new jobs known only by their solo profile;
the quantile model and the classifier are fitted on both copies.

Estimators compared (``ESTIMATORS``): ``linear`` (ridge regression on median-imputed, standardised
features with missing-value indicators), ``random_forest`` and ``gradient_boosting`` (histogram GBRT,
native missing values). Hyper-parameters are fixed library-default-like values, not tuned to folds.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.interference import forest
from scheduler.interference.datasets import PERMISSIVE_DATASETS, PairRecord, Profile
from scheduler.interference.features import (
    FEATURE_NAMES,
    N_BASE,
    Fingerprints,
    ordered_features,
    ordered_table,
)

ESTIMATORS: tuple[str, ...] = ("linear", "random_forest", "gradient_boosting")
DEFAULT_ESTIMATOR = "gradient_boosting"
Y_FLOOR = 0.01

# Columns that tell the model something about a job beyond the GPU: utilisation or a fingerprint.
_SELF_INFO = [FEATURE_NAMES.index(n) for n in ("s_gpu_util", "s_mem_util", "sens_s")]
_OTHER_INFO = [FEATURE_NAMES.index(n) for n in ("o_gpu_util", "o_mem_util", "agg_o")]


def make_regressor(kind: str, seed: int = 0) -> Any:
    # scikit-learn is imported here, not at module level: the scheduler imports every plugin at
    # start-up and only needs it once a trained model is loaded.
    from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "linear":
        return make_pipeline(
            SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True),
            StandardScaler(),
            Ridge(alpha=1.0),
        )
    if kind == "random_forest":
        return RandomForestRegressor(
            n_estimators=200, min_samples_leaf=3, max_features=0.5, n_jobs=1, random_state=seed
        )
    if kind == "gradient_boosting":
        return HistGradientBoostingRegressor(
            max_iter=300, learning_rate=0.05, min_samples_leaf=10, random_state=seed
        )
    raise ValueError(f"unknown estimator {kind!r}; known: {', '.join(ESTIMATORS)}")


@dataclass
class InterferenceModel:
    """A trained model plus what it needs at prediction time (fingerprints, active feature columns)."""

    estimator: str
    datasets: tuple[str, ...]
    fingerprints: Fingerprints
    columns: np.ndarray  # bool mask over FEATURE_NAMES: columns seen (non-NaN) in training
    regressor: Any  # rows with fingerprints
    base_regressor: Any  # rows without fingerprints
    quantile: Any  # None when fitted without extras; then the regressor's value
    classifier: Any  # None when training saw one class only; then ``p_feasible_constant``
    p_feasible_constant: float = 1.0
    quantile_alpha: float = 0.1
    # Conformal correction subtracted from the quantile prediction (see ``conformal_shift``).
    quantile_shift: float = 0.0
    gpu_types: tuple[str, ...] = ()
    n_pairs: int = 0
    created: str = ""
    sklearn_version: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def research_only(self) -> bool:
        """True when trained on data the platform may not use commercially (e.g. Lucid)."""
        return any(d not in PERMISSIVE_DATASETS for d in self.datasets)

    def describe(self) -> str:
        return f"{self.estimator} model on {'+'.join(self.datasets)} ({self.n_pairs} pairs)"

    # -- training ---------------------------------------------------------------------------------

    @classmethod
    def fit(
        cls,
        records: Sequence[PairRecord],
        estimator: str = DEFAULT_ESTIMATOR,
        seed: int = 0,
        quantile_alpha: float = 0.1,
        extras: bool = True,
        conservative: bool = True,
    ) -> InterferenceModel:
        """Fit on ``records``; ``extras=False`` skips the quantile model and the classifier (they then
        fall back to the regressor and the training share of feasible pairs): for estimator comparisons.
        ``conservative=False`` skips the quantile model only (the online benchmark retrains often and
        scores the mean prediction and the classifier, not admission)."""
        import sklearn
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        if not records:
            raise ValueError("no training pairs")
        if estimator not in ESTIMATORS:
            raise ValueError(f"unknown estimator {estimator!r}; known: {', '.join(ESTIMATORS)}")
        fp = Fingerprints.fit(records)
        table = ordered_table(records, fp, out_of_group=True)
        blank = table.x.copy()
        blank[:, N_BASE:] = np.nan
        x = np.vstack([table.x, blank])
        y = np.concatenate([table.y, table.y])
        ok = np.concatenate([table.feasible, table.feasible])
        columns = ~np.all(np.isnan(x), axis=0)
        xa = x[:, columns]
        if not ok.any():
            raise ValueError("no feasible training pairs")
        # Two regressors: one for rows with fingerprints (jobs measured with other partners), one
        # for rows without (new jobs known by their solo profile only). A single model fitted on
        # both (fingerprints blanked in a copy) was 0.004 MAE worse on Gavel in grouped CV.
        n = table.x.shape[0]
        regressor = make_regressor(estimator, seed).fit(xa[:n][ok[:n]], y[:n][ok[:n]])
        base_columns = columns.copy()
        base_columns[N_BASE:] = False
        xb = table.x[:, base_columns]
        base_regressor = make_regressor(estimator, seed).fit(xb[table.feasible], table.y[table.feasible])
        quantile = None
        shift = 0.0
        if extras and conservative:

            def make_quantile() -> Any:
                return HistGradientBoostingRegressor(
                    loss="quantile",
                    quantile=quantile_alpha,
                    max_iter=100,
                    learning_rate=0.1,
                    min_samples_leaf=10,
                    random_state=seed,
                )

            quantile = make_quantile().fit(xa[ok], y[ok])
            feasible = table.feasible
            shift = conformal_shift(
                make_quantile, xa[:n][feasible], table.y[feasible], table.groups[feasible], quantile_alpha
            )
        classifier = None
        p_const = float(ok.mean())
        if extras and 0 < ok.sum() < ok.size:
            classifier = HistGradientBoostingClassifier(
                max_iter=100, learning_rate=0.1, min_samples_leaf=10, random_state=seed
            ).fit(xa, ok.astype(int))
        return cls(
            estimator=estimator,
            datasets=tuple(sorted({r.dataset for r in records})),
            fingerprints=fp,
            columns=columns,
            regressor=regressor,
            base_regressor=base_regressor,
            quantile=quantile,
            quantile_shift=shift,
            classifier=classifier,
            p_feasible_constant=p_const,
            quantile_alpha=quantile_alpha,
            gpu_types=tuple(sorted({r.gpu_type for r in records})),
            n_pairs=len(records),
            created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            sklearn_version=sklearn.__version__,
        )

    # -- prediction -------------------------------------------------------------------------------

    def features(self, pairs: Sequence[tuple[Profile, Profile, str, str]]) -> np.ndarray:
        return ordered_features(pairs, self.fingerprints)

    def supported(self, x: np.ndarray) -> np.ndarray:
        """Rows where the model has learnt-from information about both jobs (else use the fallback)."""
        known = ~np.isnan(x) & self.columns[None, :]
        return known[:, _SELF_INFO].any(axis=1) & known[:, _OTHER_INFO].any(axis=1)

    def predict_features(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(y, y_conservative, p_feasible) for ordered feature rows; y values clipped to [0.01, 1]."""
        if x.shape[0] == 0:
            empty = np.zeros(0)
            return empty, empty, empty
        with _one_thread():
            return self._predict_features(x)

    def _predict_features(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        xa = x[:, self.columns]
        has_fp = ~np.isnan(x[:, N_BASE:]).all(axis=1)
        y = np.empty(x.shape[0])
        if has_fp.any():
            y[has_fp] = forest.predict(self.regressor, xa[has_fp])
        if (~has_fp).any():
            base_columns = self.columns.copy()
            base_columns[N_BASE:] = False
            y[~has_fp] = forest.predict(self.base_regressor, x[~has_fp][:, base_columns])
        y = np.clip(y, Y_FLOOR, 1.0)
        if self.quantile is None:
            yq = y
        else:
            yq = np.minimum(np.clip(forest.predict(self.quantile, xa) - self.quantile_shift, Y_FLOOR, 1.0), y)
        if self.classifier is None:
            p = np.full(x.shape[0], self.p_feasible_constant)
        else:
            p = forest.predict_proba(self.classifier, xa)[:, 1]
        return y, yq, p

    def predict_records(self, records: Sequence[PairRecord]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Predictions for the two ordered rows of every record (A|B at 2i, B|A at 2i+1)."""
        table = ordered_table(records, self.fingerprints)
        y, yq, p = self.predict_features(table.x)
        # A pair either runs or not: both orders get the mean probability.
        p2 = p.reshape(-1, 2).mean(axis=1).repeat(2) if p.size else p
        return y, yq, p2


def conformal_shift(
    make: Any, x: np.ndarray, y: np.ndarray, groups: np.ndarray, alpha: float, folds: int = 3
) -> float:
    """Conformalised quantile regression (Romano et al., 2019), one-sided, grouped.

    Out-of-group scores ``E_i = q(x_i) - y_i`` from a ``folds``-fold GroupKFold over model-family pairs;
    the shift is their ``ceil((1 - alpha)(m + 1)) / m`` empirical quantile, so that
    ``P(y >= q(x) - shift) >= 1 - alpha`` for an unseen pair exchangeable with the training pairs. A
    quantile model alone under-covers unseen pairs (80-86 % instead of 90 % in grouped CV).
    """
    from sklearn.model_selection import GroupKFold

    n_groups = len(set(groups.tolist()))
    if n_groups < 2 or y.size < 10:
        return 0.0
    scores = np.empty(y.size)
    for train, test in GroupKFold(n_splits=min(folds, n_groups)).split(x, groups=groups):
        scores[test] = make().fit(x[train], y[train]).predict(x[test]) - y[test]
    level = min(1.0, np.ceil((1.0 - alpha) * (y.size + 1)) / y.size)
    return float(np.quantile(scores, level))


_controller: Any = None


def _one_thread() -> Any:
    """OpenMP limited to one thread while predicting: the scheduler's batches are a few hundred rows,
    where spinning up a thread team per tree costs more than it saves (measured 2x at 384 rows).
    The controller is built once (discovering the libraries takes ~10 ms); limiting then is ~20 us."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="openmp")


def pack_decision(y_a: np.ndarray, y_b: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """Pack two jobs on one GPU iff they can run together and ``y_A + y_B > 1`` (beats taking turns)."""
    return feasible & (np.nan_to_num(y_a) + np.nan_to_num(y_b) > 1.0)


def slowdown(y: np.ndarray | float) -> np.ndarray | float:
    """``s = 1 / y`` with y floored at 0.01 (a slowdown of at most 100x)."""
    if isinstance(y, float):
        return 1.0 / max(Y_FLOOR, y) if not math.isnan(y) else math.nan
    return 1.0 / np.maximum(Y_FLOOR, y)

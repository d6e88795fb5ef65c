"""Guarded retraining on the platform's own measurements, with versioned model files (issue 21).

``retrain_guarded`` fits a candidate on the public base pairs plus the platform's own measurements
(each counted ``own_weight`` times: the cluster's own hardware and jobs are what the model is for)
and keeps it only if it is no worse on the platform's own data than the model in use::

    new_error = grouped-CV MAE on own measurements: folds = model-family pairs of the own data;
                each fold's model is fitted on base + the other folds' own measurements
    old_error = MAE of the model in use on all own measurements
    accept  iff  new_error <= old_error   (or there is no model in use)

``old_error`` is the in-use model's error as it stands; it may have seen some of these measurements
in an earlier retrain, which only makes the guard stricter. Every candidate is written as
``interference-v<N>.joblib`` under the model folder and every decision appended to
``interference-history.jsonl`` (both errors, the version, the measurement count); an accepted one is
also copied to the file the platform loads (``interference.joblib``), atomically.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.interference.datasets import PairRecord
from scheduler.interference.features import clip_y
from scheduler.interference.models import InterferenceModel
from scheduler.interference.store import DEFAULT_MODEL_FILE, save_model

HISTORY_FILE = "interference-history.jsonl"
_VERSION = re.compile(r"^interference-v(\d+)\.joblib$")

Fit = Callable[[Sequence[PairRecord]], Any]


@dataclass(frozen=True)
class RetrainOutcome:
    accepted: bool
    version: str  # file name of the candidate ("" when none was fitted)
    new_error: float | None
    old_error: float | None
    measurements: int
    reason: str
    at: str


def own_error(model: Any, records: Sequence[PairRecord]) -> float:
    """MAE of ``model`` over the feasible entries of ``records`` (y clipped to (0, 1])."""
    y_hat, _, _ = model.predict_records(list(records))
    y = np.array([clip_y(v) for r in records for v in (r.norm_a, r.norm_b)], dtype=float)
    ok = np.repeat([r.feasible for r in records], 2) & ~np.isnan(y)
    return float(np.mean(np.abs(np.asarray(y_hat)[ok] - y[ok]))) if ok.any() else math.nan


def grouped_cv_error(
    base: Sequence[PairRecord], own: Sequence[PairRecord], fit: Fit, folds: int = 3, own_weight: int = 3
) -> float:
    """Grouped-CV MAE on ``own`` (module docstring); NaN with fewer than two family pairs."""
    from sklearn.model_selection import GroupKFold

    groups = np.array([r.group for r in own])
    n_groups = len(set(groups.tolist()))
    if n_groups < 2:
        return math.nan
    errors, weights = [], []
    for train, test in GroupKFold(n_splits=min(folds, n_groups)).split(groups, groups=groups):
        training = list(base) + [own[i] for i in train for _ in range(own_weight)]
        held = [own[i] for i in test]
        err = own_error(fit(training), held)
        if not math.isnan(err):
            errors.append(err)
            weights.append(len(held))
    return float(np.average(errors, weights=weights)) if errors else math.nan


def next_version(model_dir: Path) -> str:
    found = [
        int(m.group(1)) for p in model_dir.glob("interference-v*.joblib") if (m := _VERSION.match(p.name))
    ]
    return f"interference-v{max(found, default=0) + 1}.joblib"


def read_history(model_dir: Path) -> list[dict[str, Any]]:
    path = model_dir / HISTORY_FILE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def retrain_guarded(
    *,
    base: Sequence[PairRecord],
    own: Sequence[PairRecord],
    old: Any | None,
    model_dir: Path,
    fit: Fit | None = None,
    folds: int = 3,
    own_weight: int = 3,
    min_measurements: int = 10,
) -> RetrainOutcome:
    """Fit, compare and keep or discard a candidate (module docstring); the decision is recorded."""
    fit = fit or (lambda records: InterferenceModel.fit(records))
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    model_dir.mkdir(parents=True, exist_ok=True)

    def done(outcome: RetrainOutcome) -> RetrainOutcome:
        with (model_dir / HISTORY_FILE).open("a") as fh:
            fh.write(json.dumps({k: _finite(v) for k, v in asdict(outcome).items()}) + "\n")
        return outcome

    if len(own) < min_measurements:
        reason = f"{len(own)} own measurements, fewer than {min_measurements}: not retrained"
        return done(RetrainOutcome(False, "", None, None, len(own), reason, now))
    new_error = grouped_cv_error(base, own, fit, folds=folds, own_weight=own_weight)
    if math.isnan(new_error):
        reason = "own measurements cover fewer than two model-family pairs: no grouped CV, not retrained"
        return done(RetrainOutcome(False, "", None, None, len(own), reason, now))
    old_error = own_error(old, own) if old is not None else None
    version = next_version(model_dir)
    candidate = fit(list(base) + [r for r in own for _ in range(own_weight)])
    if hasattr(candidate, "meta"):
        candidate.meta.update({"version": version, "own_measurements": len(own), "cv_error_own": new_error})
    save_model(candidate, model_dir / version)
    if old_error is not None and new_error > old_error:
        reason = f"kept the model in use: candidate grouped-CV MAE {new_error:.4f} > {old_error:.4f}"
        return done(RetrainOutcome(False, version, new_error, old_error, len(own), reason, now))
    save_model(candidate, model_dir / DEFAULT_MODEL_FILE)
    if old_error is None:
        reason = f"{version} in use: no model was in use (candidate grouped-CV MAE {new_error:.4f})"
    else:
        reason = f"{version} in use: candidate grouped-CV MAE {new_error:.4f} <= {old_error:.4f}"
    return done(RetrainOutcome(True, version, new_error, old_error, len(own), reason, now))


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def model_in_use(model_dir: Path) -> str:
    """The name of the model the platform loads: the newest accepted version when retraining put it
    there, ``interference.joblib`` (trained by hand, e.g. ``make models``) otherwise, or ``none``."""
    if not (model_dir / DEFAULT_MODEL_FILE).is_file():
        return "none"
    accepted = [e for e in read_history(model_dir) if e.get("accepted")]
    return str(accepted[-1]["version"]) if accepted else DEFAULT_MODEL_FILE

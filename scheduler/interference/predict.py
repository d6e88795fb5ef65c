"""Batch prediction for co-location *sets*: what the scheduler asks once per placement decision.

A query is one candidate GPU: its type, the sharing mechanism and the profiles of all jobs that would
share it (the new job and the residents). All ordered pairs of all candidates go through the model in
one call (the per-call overhead of scikit-learn dominates otherwise), pairwise slowdowns are composed
per set with ``composition.compose_slowdowns``, and pairs the model cannot speak for (no trained model,
or neither utilisation nor fingerprint known for a job) use ``composition.analytic_pair_throughput``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.interference.composition import (
    analytic_pair_throughput,
    compose_slowdowns,
    memory_fits,
)
from scheduler.interference.datasets import Profile
from scheduler.interference.models import Y_FLOOR, InterferenceModel


@dataclass(frozen=True)
class SetQuery:
    """Jobs that would share one GPU (``profiles[0]`` is usually the newcomer)."""

    profiles: Sequence[Profile]
    gpu_type: str = ""
    mechanism: str = ""
    gpu_memory_mib: float = 0.0


@dataclass
class SetPrediction:
    """Per job of the set (same order as the query): expected and conservative slowdowns."""

    slowdowns: np.ndarray
    conservative: np.ndarray
    p_feasible: float
    # "model", "analytic" or "model+analytic" (some pairs fell back).
    source: str

    @property
    def throughputs(self) -> np.ndarray:
        """Normalised throughputs ``1 / s_i``."""
        return 1.0 / self.slowdowns

    @property
    def total_throughput(self) -> float:
        """Useful work the GPU does per unit time, in solo-job units: ``sum_i 1 / s_i``."""
        return float(self.throughputs.sum())


def predict_sets(model: InterferenceModel | None, queries: Sequence[SetQuery]) -> list[SetPrediction]:
    """Predictions for every query; one model call for all of their ordered pairs."""
    index: list[tuple[int, int, int]] = []
    tuples: list[tuple[Profile, Profile, str, str]] = []
    for q, query in enumerate(queries):
        k = len(query.profiles)
        for i in range(k):
            for j in range(k):
                if i != j:
                    index.append((q, i, j))
                    tuples.append((query.profiles[i], query.profiles[j], query.gpu_type, query.mechanism))
    n = len(tuples)
    y = np.ones(n)
    yq = np.ones(n)
    p = np.ones(n)
    use_model = np.zeros(n, dtype=bool)
    # Pair predictions depend only on the pair's profiles, GPU type and mechanism: memoised across
    # calls (the scheduler asks the same pairs every cycle; scikit-learn's per-call cost dominates).
    keys = [_pair_key(t) for t in tuples]
    cache = _pair_cache(model)
    miss = [r for r, key in enumerate(keys) if key not in cache]
    if model is not None and miss:
        x = model.features([tuples[r] for r in miss])
        supported = model.supported(x)
        rows = np.asarray(miss)
        use_model[rows] = supported
        if supported.any():
            ym, yqm, pm = model.predict_features(x[supported])
            hit_rows = rows[supported]
            offsets = getattr(model, "pair_offsets", None)
            if offsets is not None:  # a model corrected by measurements (interference.online_model)
                dy, dp = offsets([tuples[r] for r in hit_rows])
                ym, yqm = np.clip(ym + dy, Y_FLOOR, 1.0), np.clip(yqm + dy, Y_FLOOR, 1.0)
                pm = np.clip(pm + dp, 0.0, 1.0)
            y[hit_rows], yq[hit_rows], p[hit_rows] = ym, yqm, pm
    for r in miss:
        if not use_model[r]:
            ps, po, _, _ = tuples[r]
            y[r] = yq[r] = analytic_pair_throughput(ps, po)
            p[r] = 1.0
        cache[keys[r]] = (float(y[r]), float(yq[r]), float(p[r]), bool(use_model[r]))
    missed = set(miss)
    for r, key in enumerate(keys):
        if r not in missed:
            y[r], yq[r], p[r], use_model[r] = cache[key]
    out: list[SetPrediction] = []
    pos = 0
    for query in queries:
        k = len(query.profiles)
        s = np.ones((k, k))
        sq = np.ones((k, k))
        p_set = 1.0
        n_model = n_analytic = 0
        for i in range(k):
            for j in range(k):
                if i == j:
                    continue
                s[i, j] = 1.0 / max(Y_FLOOR, y[pos])
                sq[i, j] = 1.0 / max(Y_FLOOR, yq[pos])
                if j > i:
                    p_set *= float(p[pos])
                if use_model[pos]:
                    n_model += 1
                else:
                    n_analytic += 1
                pos += 1
        fits = memory_fits(list(query.profiles), query.gpu_memory_mib) if k > 1 else True
        if fits is False:
            p_set = 0.0
        source = "model" if n_analytic == 0 else ("analytic" if n_model == 0 else "model+analytic")
        if k <= 1:
            source = "alone"
        out.append(SetPrediction(compose_slowdowns(s), compose_slowdowns(sq), p_set, source))
    return out


_CACHE_LIMIT = 200_000
_cache_state: dict[str, object] = {"model": None, "pairs": {}}


def clear_prediction_cache() -> None:
    """Forget memoised pair predictions (benchmarks measure cold decisions with it)."""
    _cache_state["model"] = None
    _cache_state["pairs"] = {}


def _freeze(profile: Profile) -> tuple[tuple[str, float | str], ...]:
    return tuple(sorted(profile.items()))


def _pair_key(t: tuple[Profile, Profile, str, str]) -> tuple[object, ...]:
    return (_freeze(t[0]), _freeze(t[1]), t[2], t[3])


def _pair_cache(
    model: InterferenceModel | None,
) -> dict[tuple[object, ...], tuple[float, float, float, bool]]:
    """The memo for ``model`` (a new model, or a full memo, starts it over)."""
    pairs = _cache_state["pairs"]
    assert isinstance(pairs, dict)
    if _cache_state["model"] is not model or len(pairs) > _CACHE_LIMIT:
        pairs = {}
        _cache_state["model"] = model
        _cache_state["pairs"] = pairs
    return pairs

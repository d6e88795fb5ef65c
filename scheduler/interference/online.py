"""Learning from the platform's own co-location measurements, and the benchmark that measures it.

**The online predictor** (:class:`OnlinePredictor`) is the trained model plus a *measured-residual
correction*. Each own measurement ``i`` of an ordered row (self ``s`` next to other ``o`` on GPU
``g``) leaves a residual ``r_i = y_i - y_hat_i``, where ``y_hat_i`` is the model's prediction made
before the measurement was seen (the prediction at placement time; never an in-sample fit). The
correction is hierarchical, each level shrunk towards the one above (random-effects style)::

    b_1(fs, fo)        = sum_{i in K_1} r_i                     / (|K_1| + k_1)
    b_2(fs, fo, g)     = sum_{i in K_2} (r_i - b_1)             / (|K_2| + k_2)
    b_3(job_s, fo)     = sum_{i in K_3} (r_i - b_1 - b_2)       / (|K_3| + k_3)
    y_online = clip(y_hat + b_1 + b_2 + b_3, 0.01, 1)

with ``fs``/``fo`` the model families, ``job_s`` the job configuration (Gavel's keys include the GPU)
and ``K_l`` the measurements that share the query's key at level ``l``. The feasibility probability
gets the same correction with residual ``feasible_i - p_hat_i``. Why a correction and not only a
retrain: the model's features do not name the family pair, so a retrained regressor cannot tell the
rows of one unseen family pair from similar-looking rows of other pairs; the residual of the pair
itself can.

**Retraining** every ``k`` measurements refits the model on the base pairs plus the own
measurements, each own measurement counted ``own_weight`` times (weighted up). The residuals of the
correction stay those at placement time: a retrained model has seen them, so its own residuals on
them would be in-sample and too small.

**The benchmark** (:func:`run_online`): hold out whole model-family pairs (groups); reveal their
measurements one by one, one per held-out pair per round in a random order, as a cluster would meet
them; every round, score MAE (``y`` clipped to (0, 1]) and pack accuracy (pack iff feasible and
``y_A + y_B > 1``) on the held-out rows *not yet revealed*, beside always-pack on the same rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.interference.datasets import PairRecord, Profile
from scheduler.interference.features import clip_y
from scheduler.interference.models import DEFAULT_ESTIMATOR, InterferenceModel, pack_decision

# Shrinkage pseudo-counts per level of the correction: (family pair), (+ GPU), (job, other family).
DEFAULT_SHRINK: tuple[float, float, float] = (2.0, 4.0, 4.0)

Fit = Callable[[Sequence[PairRecord]], Any]


def _family(profile: Profile) -> str:
    return str(profile.get("model_family", ""))


def _levels(ps: Profile, po: Profile, gpu_type: str) -> tuple[tuple[str, ...], ...]:
    fs, fo = _family(ps), _family(po)
    return ((fs, fo), (fs, fo, gpu_type), (str(ps.get("job_key", "")), fo))


def ordered_rows(record: PairRecord) -> tuple[tuple[Profile, Profile, float], tuple[Profile, Profile, float]]:
    """(self, other, measured y) for the A|B and the B|A row of a record."""
    return (
        (record.profile_a, record.profile_b, record.norm_a),
        (record.profile_b, record.profile_a, record.norm_b),
    )


@dataclass
class ResidualCorrection:
    """Hierarchical shrunk mean of measured-minus-predicted residuals (module docstring)."""

    shrink: tuple[float, ...] = DEFAULT_SHRINK
    # Per ordered measured row: level keys, y residual (NaN when infeasible), feasibility residual.
    rows: list[tuple[tuple[tuple[str, ...], ...], float, float]] = field(default_factory=list)
    _y: list[dict[tuple[str, ...], float]] = field(default_factory=list)
    _p: list[dict[tuple[str, ...], float]] = field(default_factory=list)

    def add(self, record: PairRecord, y_hat: Sequence[float], p_hat: float) -> None:
        """One measured pair; ``y_hat`` (A|B, B|A) and ``p_hat`` are the predictions made before it."""
        for (ps, po, y), yh in zip(ordered_rows(record), y_hat, strict=True):
            ry = clip_y(y) - yh if record.feasible and not math.isnan(y) else math.nan
            self.rows.append((_levels(ps, po, record.gpu_type), ry, float(record.feasible) - p_hat))
        self._y, self._p = self._fit(1), self._fit(2)

    def _fit(self, column: int) -> list[dict[tuple[str, ...], float]]:
        used = [(keys, ry if column == 1 else rp) for keys, ry, rp in self.rows]
        used = [(keys, r) for keys, r in used if not math.isnan(r)]
        fitted = np.zeros(len(used))
        out: list[dict[tuple[str, ...], float]] = []
        for level, k in enumerate(self.shrink):
            sums: dict[tuple[str, ...], list[float]] = {}
            for i, (keys, r) in enumerate(used):
                s = sums.setdefault(keys[level], [0.0, 0.0])
                s[0] += r - fitted[i]
                s[1] += 1.0
            effect = {key: total / (n + k) for key, (total, n) in sums.items()}
            for i, (keys, _) in enumerate(used):
                fitted[i] += effect[keys[level]]
            out.append(effect)
        return out

    def offsets(self, ps: Profile, po: Profile, gpu_type: str) -> tuple[float, float]:
        """(y offset, feasibility offset) for the ordered row ``ps`` next to ``po`` on ``gpu_type``."""
        keys = _levels(ps, po, gpu_type)
        dy = sum(level.get(key, 0.0) for level, key in zip(self._y, keys, strict=False))
        dp = sum(level.get(key, 0.0) for level, key in zip(self._p, keys, strict=False))
        return dy, dp

    def __len__(self) -> int:
        return len(self.rows) // 2


@dataclass
class OnlinePredictor:
    """A trained model, the own measurements it learns from, and the residual correction."""

    base: list[PairRecord]
    fit: Fit
    own_weight: int = 3
    correct: bool = True
    shrink: tuple[float, ...] = DEFAULT_SHRINK
    model: Any = None
    own: list[PairRecord] = field(default_factory=list)
    correction: ResidualCorrection = field(init=False)
    retrains: int = 0

    def __post_init__(self) -> None:
        self.correction = ResidualCorrection(shrink=self.shrink)
        if self.model is None:
            self.retrain()

    def retrain(self) -> None:
        self.model = self.fit(list(self.base) + [r for r in self.own for _ in range(self.own_weight)])
        self.retrains += 1

    def predict(self, records: Sequence[PairRecord]) -> tuple[np.ndarray, np.ndarray]:
        """(y, p_feasible) for the ordered rows of ``records`` (A|B at 2i, B|A at 2i+1)."""
        if not records:
            return np.zeros(0), np.zeros(0)
        y, _, p = self.model.predict_records(records)
        y, p = np.array(y, dtype=float), np.array(p, dtype=float)
        if self.correct and len(self.correction):
            for i, r in enumerate(records):
                for j, (ps, po, _) in enumerate(ordered_rows(r)):
                    dy, dp = self.correction.offsets(ps, po, r.gpu_type)
                    y[2 * i + j] += dy
                    p[2 * i + j] += dp
            # A pair runs or not: both orders share one probability.
            p = p.reshape(-1, 2).mean(axis=1).repeat(2)
        return np.clip(y, 0.01, 1.0), np.clip(p, 0.0, 1.0)

    def observe(self, record: PairRecord) -> None:
        """Learn from one measured co-location (residuals against the model in use now)."""
        y, _, p = self.model.predict_records([record])
        self.correction.add(record, (float(y[0]), float(y[1])), float(np.mean(p)))
        self.own.append(record)


def score(records: Sequence[PairRecord], y_hat: np.ndarray, p_hat: np.ndarray) -> dict[str, float]:
    """MAE over feasible entries, pack accuracy and always-pack accuracy over pairs."""
    nan = float("nan")
    if not records:
        return {"pairs": 0, "entries": 0, "mae": nan, "pack_accuracy": nan, "always_pack_accuracy": nan}
    y = np.array([clip_y(v) for r in records for v in (r.norm_a, r.norm_b)], dtype=float)
    feasible = np.array([r.feasible for r in records])
    ok = np.repeat(feasible, 2) & ~np.isnan(y)
    truth = pack_decision(y[0::2], y[1::2], feasible)
    pred = pack_decision(y_hat[0::2], y_hat[1::2], p_hat[0::2] >= 0.5)
    return {
        "pairs": len(records),
        "entries": int(ok.sum()),
        "mae": float(np.mean(np.abs(y_hat[ok] - y[ok]))) if ok.any() else nan,
        "pack_accuracy": float(np.mean(pred == truth)),
        "always_pack_accuracy": float(np.mean(truth)),
    }


def family_pair_split(
    records: Sequence[PairRecord], fraction: float, seed: int
) -> tuple[list[str], list[str]]:
    """(base groups, held-out groups): a random ``fraction`` of the model-family pairs held out."""
    groups = sorted({r.group for r in records})
    if len(groups) < 2:
        raise ValueError("an online split needs at least two model-family pairs")
    n_out = min(len(groups) - 1, max(1, round(fraction * len(groups))))
    rng = np.random.default_rng(seed)
    out = sorted(rng.choice(groups, size=n_out, replace=False).tolist())
    return [g for g in groups if g not in out], out


def reveal_order(held_out: Sequence[PairRecord], max_per_pair: int, seed: int) -> list[list[int]]:
    """Rounds of indices into ``held_out``: each round reveals one more measurement of every held-out
    family pair that has one left, pairs and rows in a random order, at most ``max_per_pair`` rounds."""
    rng = np.random.default_rng(seed)
    by_group: dict[str, list[int]] = {}
    for i, r in enumerate(held_out):
        by_group.setdefault(r.group, []).append(i)
    queues = {g: rng.permutation(idx).tolist() for g, idx in sorted(by_group.items())}
    rounds = []
    for depth in range(max_per_pair):
        order = [g for g in rng.permutation(sorted(queues)).tolist() if len(queues[g]) > depth]
        if not order:
            break
        rounds.append([queues[g][depth] for g in order])
    return rounds


@dataclass(frozen=True)
class OnlineConfig:
    max_per_pair: int = 20
    retrain_every: int = 10  # measurements (pairs) between retrains; 0 = never retrain
    own_weight: int = 3
    correct: bool = True
    shrink: tuple[float, ...] = DEFAULT_SHRINK
    seed: int = 0


def run_split(
    base: Sequence[PairRecord], held_out: Sequence[PairRecord], config: OnlineConfig, fit: Fit
) -> dict[str, Any]:
    """One split's curve: a point per round (0 = nothing revealed) scored on the unseen rows."""
    predictor = OnlinePredictor(
        base=list(base), fit=fit, own_weight=config.own_weight, correct=config.correct, shrink=config.shrink
    )
    static = predictor.model
    unseen = set(range(len(held_out)))
    curve = []

    def point(per_pair: int) -> None:
        rest = [held_out[i] for i in sorted(unseen)]
        y, p = predictor.predict(rest)
        # The model as first trained, never corrected nor retrained, on the same rows: the baseline.
        ys, _, ps = static.predict_records(rest) if rest else (np.zeros(0), None, np.zeros(0))
        fixed = score(rest, np.asarray(ys, dtype=float), np.asarray(ps, dtype=float))
        curve.append(
            {
                "measurements_per_pair": per_pair,
                "measurements": len(predictor.own),
                "retrains": predictor.retrains - 1,
                **score(rest, y, p),
                "static_mae": fixed["mae"],
                "static_pack_accuracy": fixed["pack_accuracy"],
            }
        )

    point(0)
    for depth, batch in enumerate(reveal_order(held_out, config.max_per_pair, config.seed), start=1):
        for i in batch:
            predictor.observe(held_out[i])
            unseen.discard(i)
            if config.retrain_every and len(predictor.own) % config.retrain_every == 0:
                predictor.retrain()
        point(depth)
    return {"groups": sorted({r.group for r in held_out}), "pairs": len(held_out), "curve": curve}


def average_curves(splits: Sequence[dict[str, Any]]) -> list[dict[str, float]]:
    """Mean over splits of each curve point; a split whose curve ended early keeps its last point
    (all its held-out rows revealed) out of later averages."""
    depth = max(len(s["curve"]) for s in splits)
    keys = ("mae", "pack_accuracy", "always_pack_accuracy", "static_mae", "static_pack_accuracy")
    out = []
    for d in range(depth):
        pts = [s["curve"][d] for s in splits if d < len(s["curve"]) and s["curve"][d]["pairs"]]
        if not pts:
            break
        row: dict[str, float] = {"measurements_per_pair": d, "splits": len(pts)}
        for k in keys:
            vals = [p[k] for p in pts if not math.isnan(p[k])]
            row[k] = float(np.mean(vals)) if vals else float("nan")
        row["unseen_pairs"] = float(np.mean([p["pairs"] for p in pts]))
        out.append(row)
    return out


def run_online(
    records: Sequence[PairRecord],
    config: OnlineConfig,
    splits: int = 5,
    fraction: float = 0.2,
    reveal: Sequence[PairRecord] | None = None,
    fit: Fit | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The benchmark (module docstring): random family-pair splits, or ``reveal`` as the held-out set
    with every record of ``records`` as the base. Returns ``final``, the mean ``curve`` and per split."""
    fit = fit or default_fit(config.seed)
    if reveal is not None:
        plans = [(list(records), list(reveal), config.seed)]
    else:
        plans = []
        for s in range(splits):
            base_groups, out_groups = family_pair_split(records, fraction, config.seed + s)
            held = set(out_groups)
            plans.append(
                (
                    [r for r in records if r.group not in held],
                    [r for r in records if r.group in held],
                    config.seed + s,
                )
            )
    results = []
    for n, (base, held_out, seed) in enumerate(plans, start=1):
        cfg = OnlineConfig(**{**config.__dict__, "seed": seed})
        results.append(run_split(base, held_out, cfg, fit))
        if progress is not None:
            last = results[-1]["curve"][-1]
            progress(
                f"split {n}/{len(plans)}: {len(results[-1]['groups'])} held-out family pairs, final MAE "
                f"{last['mae']:.4f}, pack {last['pack_accuracy']:.3f} (always {last['always_pack_accuracy']:.3f})"
            )
    curve = average_curves(results)
    at = min(config.max_per_pair, len(curve) - 1)
    final = dict(curve[at])
    start = curve[0]
    return {
        "final": {
            "mae": final["mae"],
            "pack_accuracy": final["pack_accuracy"],
            "always_pack_accuracy": final["always_pack_accuracy"],
            "measurements_per_pair": final["measurements_per_pair"],
            "unseen_pairs": final["unseen_pairs"],
            "static_mae": final["static_mae"],
            "static_pack_accuracy": final["static_pack_accuracy"],
        },
        "start": {
            "mae": start["mae"],
            "pack_accuracy": start["pack_accuracy"],
            "always_pack_accuracy": start["always_pack_accuracy"],
        },
        "curve": curve,
        "splits": results,
    }


def default_fit(seed: int = 0, estimator: str = DEFAULT_ESTIMATOR) -> Fit:
    def fit(records: Sequence[PairRecord]) -> InterferenceModel:
        return InterferenceModel.fit(records, estimator=estimator, seed=seed, conservative=False)

    return fit


def plot_online(curve: Sequence[dict[str, float]], path: str) -> None:
    """MAE and pack accuracy on the unseen rows against measurements revealed per held-out pair."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [p["measurements_per_pair"] for p in curve]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(x, [p["mae"] for p in curve], marker="o", label="online (measured-residual correction)")
    a.plot(x, [p["static_mae"] for p in curve], linestyle="--", label="static model")
    a.axhline(0.09, color="grey", linewidth=0.8, label="goal 0.09")
    a.set_xlabel("measurements revealed per unseen family pair")
    a.set_ylabel("MAE of normalised throughput (unseen rows)")
    a.legend()
    b.plot(x, [p["pack_accuracy"] for p in curve], marker="o", label="online")
    b.plot(x, [p["static_pack_accuracy"] for p in curve], linestyle="--", label="static model")
    b.plot(x, [p["always_pack_accuracy"] for p in curve], color="grey", label="always pack")
    b.set_xlabel("measurements revealed per unseen family pair")
    b.set_ylabel("pack / don't-pack accuracy (unseen pairs)")
    b.legend()
    fig.suptitle("learning from own co-locations: mean of the family-pair splits")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

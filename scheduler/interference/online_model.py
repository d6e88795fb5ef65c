"""The online predictor (``scheduler.interference.online.OnlinePredictor``) as the model a scheduler
plugin calls: what ``interference.predict.predict_sets`` needs of a model, answered by the predictor's
current model plus its measured-residual correction.

``predict_sets`` asks the trained model for the ordered pairs (``features``, ``supported``,
``predict_features``) and then, when the model has one, for ``pair_offsets``: the correction's
``(dy, dp)`` of each ordered pair (self next to other on a GPU type), added to the model's ``y``, its
conservative ``y`` and the feasibility probability, then clipped. So a pair the model mispredicts is
pulled towards what was measured once it has been met.

The answers change as measurements arrive (``observe``) and at each retrain: ``version`` counts the
changes, and whoever memoises verdicts (``predict_sets``' pair memo, the plugin's memo) must forget
them when it moves (``scheduler.sim.online_interference`` does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduler.interference.datasets import PairRecord, Profile
from scheduler.interference.online import OnlinePredictor


class OnlineModel:
    """An ``OnlinePredictor`` that ``predict_sets`` can call like an ``InterferenceModel``."""

    def __init__(self, predictor: OnlinePredictor, retrain_every: int = 0) -> None:
        self.predictor = predictor
        self.retrain_every = retrain_every
        self.version = 0

    # What predict_sets calls: the current model's, plus the correction's offsets.
    def features(self, pairs: Sequence[tuple[Profile, Profile, str, str]]) -> np.ndarray:
        result: np.ndarray = self.predictor.model.features(pairs)
        return result

    def supported(self, x: np.ndarray) -> np.ndarray:
        result: np.ndarray = self.predictor.model.supported(x)
        return result

    def predict_features(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        result: tuple[np.ndarray, np.ndarray, np.ndarray] = self.predictor.model.predict_features(x)
        return result

    def pair_offsets(
        self, pairs: Sequence[tuple[Profile, Profile, str, str]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(dy, dp) per ordered pair (self, other, GPU type, mechanism); zeros before any measurement."""
        dy, dp = np.zeros(len(pairs)), np.zeros(len(pairs))
        if not (self.predictor.correct and len(self.predictor.correction)):
            return dy, dp
        for i, (ps, po, gpu_type, _) in enumerate(pairs):
            dy[i], dp[i] = self.predictor.correction.offsets(ps, po, gpu_type)
        return dy, dp

    def __getattr__(self, name: str) -> Any:
        # Everything else (describe, meta, research_only, ...) is the current model's.
        return getattr(self.predictor.model, name)

    # Learning.
    def observe(self, record: PairRecord) -> None:
        """One measured co-location; a retrain every ``retrain_every`` measurements (0: never)."""
        self.predictor.observe(record)
        if self.retrain_every and len(self.predictor.own) % self.retrain_every == 0:
            self.predictor.retrain()
        self.version += 1

    @property
    def measurements(self) -> int:
        return len(self.predictor.own)

"""Score ``balance_yield``: the seed strategy's imbalance term, fading out as multi-GPU tasks grow, and
leaving the empty nodes gang tasks need alone (math: ``scheduler.frag.lookahead``).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.row_adapters import RowScoreMixin
from scheduler.frag.balance_terms import balance_terms
from scheduler.frag.lookahead import M_ZERO, clip, empty_rows, gang_reserved_sizes, multi_gpu_share
from scheduler.framework import CycleState
from scheduler.model import Node, TaskRequest
from scheduler.plugin_registry import register


@register("balance_yield")
class BalanceYield(RowScoreMixin):
    """100 * (1 - imbalance after placement) * max(0, 1 - m / m_zero)^2, no pull to reserved empty nodes.

    Balancing spreads work, onto empty nodes too, and that spreading is most of what the term
    gains (with it stopped on every empty node the default loses 0.6-4 points on 13 of 15
    workloads). But on a workload with gang tasks, spreading 1-GPU tasks empties the pool of whole
    nodes the gang tasks need: on ``gpushare20`` (8-GPU tasks 7.6 % of the GPU request) all but 2 of
    617 8-GPU nodes were opened by arrived 50 % (FGD: 290 left) and 8-GPU tasks failed from arrived
    42 %. So on empty nodes of a size in ``gang_reserved_sizes`` (while they are no more than the
    target workload's gang demand for them) the term abstains: such a row gets the lowest score among
    the candidates that are not reserved, so balance never favours it and opening it is left to
    FGD. ``score_rows`` marks a reserved row as ``-1 - score``; ``normalize_rows`` fills it in.
    """

    name = "balance_yield"
    cacheable = True

    def __init__(self, m_zero: float = M_ZERO, reserve_for_gangs: bool = True) -> None:
        self.m_zero = m_zero
        self.reserve_for_gangs = reserve_for_gangs

    def cache_token(self, state: CycleState) -> Hashable:
        scale = self._scale(state)
        if scale <= 0:  # every score is 0 whatever the reservation (``score_rows``)
            return (scale, ())
        return (scale, self._reserved(state))

    def _scale(self, state: CycleState) -> float:
        return max(0.0, 1.0 - multi_gpu_share(state) / self.m_zero) ** 2

    def _reserved(self, state: CycleState) -> tuple[int, ...]:
        return gang_reserved_sizes(state) if self.reserve_for_gangs else ()

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        scale = self._scale(state)
        if scale <= 0:
            return np.zeros(len(rows))
        imbalance, _ = balance_terms(state.arrays, task, rows, similarity=False)
        score = scale * clip(100.0 * (1.0 - imbalance), 0.0, 100.0)
        reserved = self._reserved(state)
        if not reserved:
            return score
        arrays: ClusterArrays = state.arrays
        mark = empty_rows(arrays, rows) & np.isin(arrays.gpu_count[rows], reserved)
        return np.where(mark, -1.0 - score, score)

    def normalize_rows(self, scores: np.ndarray) -> np.ndarray:
        """Reserved rows (marked negative) get the lowest other score, or their own if all are."""
        scores = np.asarray(scores, dtype=float)
        free = scores >= 0
        if free.all():
            return scores
        if not free.any():
            return -1.0 - scores
        return np.where(free, scores, scores[free].min())

    def normalize(self, scores: list[float]) -> list[float]:
        return [float(x) for x in self.normalize_rows(np.asarray(scores, dtype=float))]

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        # One node on its own has nothing to yield to: its plain balance score.
        value = super().score(state, task, node)
        return value if value >= 0 else -1.0 - value

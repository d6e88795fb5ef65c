"""Score ``balance_yield``: the seed strategy's imbalance term, fading out as multi-GPU tasks grow, and
leaving the empty nodes gang tasks need alone (math: ``scheduler.frag.lookahead``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.row_adapters import RowScoreMixin
from scheduler.frag.balance_terms import balance_terms
from scheduler.frag.lookahead import M_ZERO, clip, empty_rows, gang_reserved_sizes, multi_gpu_share
from scheduler.framework import CycleState
from scheduler.model import GPU_MILLI, Node, TaskRequest
from scheduler.plugin_registry import register

# ``score_rows`` scores up to this many rows in plain Python (``BalanceYield._score_small``).
SMALL_ROWS = 16


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
        if rows.size <= SMALL_ROWS:
            return self._score_small(state, task, rows, scale)
        imbalance, _ = balance_terms(state.arrays, task, rows, similarity=False)
        score = scale * clip(100.0 * (1.0 - imbalance), 0.0, 100.0)
        reserved = self._reserved(state)
        if not reserved:
            return score
        arrays: ClusterArrays = state.arrays
        mark = empty_rows(arrays, rows) & np.isin(arrays.gpu_count[rows], reserved)
        return np.where(mark, -1.0 - score, score)

    def _score_small(
        self, state: CycleState, task: TaskRequest, rows: np.ndarray, scale: float
    ) -> np.ndarray:
        """``score_rows`` in plain Python over a few rows (a placement is offered a handful): the
        same IEEE operations in the same order as ``balance_terms`` and NumPy's ``std`` along the
        three (two) resources, which adds them one after another, so the same values to the bit
        (``tests/scheduler/plugins/test_balance_yield_small.py``)."""
        arrays: ClusterArrays = state.arrays
        cpu_cap = arrays.cpu_cap[rows].tolist()
        cpu_free = arrays.cpu_free[rows].tolist()
        mem_cap = arrays.mem_cap[rows].tolist()
        mem_free = arrays.mem_free[rows].tolist()
        count = arrays.gpu_count[rows].tolist()
        free = arrays.gpu_free[rows].tolist()
        exists = arrays.gpu_exists[rows].tolist()
        reserved = self._reserved(state)
        cpu_req, mem_req, gpu_req = task.cpu_milli, task.memory_mib, task.total_gpu_milli
        out: list[float] = []
        for cc, cf, mc, mf, n, fr, ex in zip(
            cpu_cap, cpu_free, mem_cap, mem_free, count, free, exists, strict=True
        ):
            c_cap = float(max(cc, 1))
            m_cap = float(max(mc, 1))
            a = (cc - cf) / c_cap + cpu_req / c_cap
            b = (mc - mf) / m_cap + mem_req / m_cap
            idle = sum(f for f, e in zip(fr, ex, strict=True) if e)
            if n > 0:
                g_cap = float(max(n * GPU_MILLI, 1))
                c = sum(GPU_MILLI - f for f, e in zip(fr, ex, strict=True) if e) / g_cap + gpu_req / g_cap
                mean = (a + b + c) / 3
                da, db, dc = a - mean, b - mean, c - mean
                imbalance = math.sqrt((da * da + db * db + dc * dc) / 3)
            else:
                mean = (a + b) / 2
                da, db = a - mean, b - mean
                imbalance = math.sqrt((da * da + db * db) / 2)
            score = scale * min(max(100.0 * (1.0 - imbalance), 0.0), 100.0)
            if reserved and n > 0 and idle == n * GPU_MILLI and cf == cc and n in reserved:
                score = -1.0 - score
            out.append(score)
        return np.array(out, dtype=float)

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

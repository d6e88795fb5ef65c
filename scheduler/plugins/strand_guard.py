"""Score ``strand_guard``: GPUs a placement newly leaves without the host memory or CPU to use them
(formulas: ``scheduler.frag.lookahead``).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.row_adapters import RowScoreMixin
from scheduler.frag.fgd_scores import target_workload
from scheduler.frag.fragmentation import TargetWorkload
from scheduler.frag.lookahead import (
    FGD_SLOPE_PER_GPU,
    M_ZERO,
    PRESSURE_FROM,
    PRESSURE_FULL,
    clip,
    cpu_pressure,
    multi_gpu_share,
)
from scheduler.framework import CycleState
from scheduler.model import GPU_MILLI, TaskRequest
from scheduler.plugin_registry import register


@register("strand_guard")
class StrandGuard(RowScoreMixin):
    """100 - slope * (GPUs newly left without host memory / CPU to use them); see the module doc."""

    name = "strand_guard"
    cacheable = True

    def __init__(
        self,
        slope: float = FGD_SLOPE_PER_GPU,
        m_zero: float | None = M_ZERO,
        power: float = 2.0,
        pressure_from: float | None = PRESSURE_FROM,
        pressure_full: float = PRESSURE_FULL,
    ) -> None:
        self.slope = slope
        self.m_zero = m_zero
        self.power = power
        self.pressure_from = pressure_from
        self.pressure_full = pressure_full
        self._per_milli: tuple[TargetWorkload, int, float] | None = None

    def cache_token(self, state: CycleState) -> Hashable:
        wl = target_workload(state)
        return (id(wl), wl.version, self._slope(state))

    def _slope(self, state: CycleState) -> float:
        """``slope * max(min(1, m / m_zero)^power, ramp^2)`` (``slope`` when ``m_zero`` is None), ramp =
        ``clip((kappa - pressure_from) / (pressure_full - pressure_from), 0, 1)``, kappa = ``cpu_pressure``."""
        if self.m_zero is None:
            return self.slope
        base = self.slope * min(1.0, multi_gpu_share(state) / self.m_zero) ** self.power
        if self.pressure_from is None:
            return base
        kappa = cpu_pressure(state)
        ramp = min(1.0, max(0.0, (kappa - self.pressure_from) / (self.pressure_full - self.pressure_from)))
        return max(base, self.slope * ramp**2)

    def _cpu_per_milli(self, state: CycleState) -> float:
        """CPU milli the target workload's GPU tasks bring per milli-GPU (0 if it has none)."""
        wl = target_workload(state)
        # Asked twice per scored batch; it changes only with the workload (held, so its id stays).
        cached = self._per_milli
        if cached is not None and cached[0] is wl and cached[1] == wl.version:
            return cached[2]
        cpu_m, milli_m, num_m, _, _, probs = wl.arrays_for(state.arrays)
        gpu_demand = float((probs * milli_m * num_m).sum())
        cpu_demand = float((probs * cpu_m * (num_m > 0)).sum())
        value = cpu_demand / gpu_demand if gpu_demand > 0 else 0.0
        self._per_milli = (wl, wl.version, value)
        return value

    def stranded(
        self, state: CycleState, rows: np.ndarray, cpu: int = 0, mem: int = 0, gpu_milli: int = 0
    ) -> np.ndarray:
        """GPUs per row without memory/CPU to use them, after taking (cpu, mem, gpu_milli)."""
        arrays: ClusterArrays = state.arrays
        count = arrays.gpu_count[rows]
        cap = np.maximum(count * GPU_MILLI, 1)
        idle = np.where(arrays.gpu_exists[rows], arrays.gpu_free[rows], 0).sum(axis=1)
        fg = (idle - gpu_milli) / cap
        other = (arrays.mem_free[rows] - mem) / np.maximum(arrays.mem_cap[rows], 1)
        per_milli = self._cpu_per_milli(state)
        if per_milli > 0:
            usable = (arrays.cpu_free[rows] - cpu) / per_milli
            other = np.minimum(other, usable / cap)
        return count * np.maximum(fg - other, 0.0)

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        slope = self._slope(state)
        if slope <= 0:
            return np.full(len(rows), 100.0)
        after = self.stranded(state, rows, task.cpu_milli, task.memory_mib, task.total_gpu_milli)
        added = np.maximum(after - self.stranded(state, rows), 0.0)
        return clip(100.0 - slope * added, 0.0, 100.0)

"""Score, ``fgd_lookahead``: the secondary score that rides on FGD in the ``candidate_lookahead`` profile.

FGD (``fgd``) decides first; this plugin adds, per node, a score in 0..100 made of two parts:

* **balance** (the seed strategy without the similarity term, ``scheduler.plugins.balance``): keep the
  node's CPU, memory and GPU in proportion so no dimension runs out while GPUs idle. It is scaled by
  ``max(0, 1 - m / m_zero)^2`` where m is the share of the target workload's GPU request that comes
  from tasks of 2+ GPUs (``TargetWorkload.multi_gpu_share``): balancing spreads work, multi-GPU
  tasks need whole nodes. With ``protect_idle`` a node whose GPUs are all idle gets no balance
  credit (balance only steers among nodes already in use, it never pulls work onto a fresh node).
* **pack** (weight ``pack``, a tie-break): the node's GPU fullness after the placement,
  ``100 * (1 - idle GPU after / GPU capacity)``; nodes without GPUs score 0. Among nodes of equal FGD
  and balance score, the fuller one wins, so partly used nodes fill before whole ones are broken.

score = balance_scale(m) * balance * idle_gate + pack_weight * pack, then divided by (1 + pack_weight)
so it stays in 0..100. All NumPy over the candidate rows; cacheable per task shape.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from scheduler.frag.arrays import ClusterArrays
from scheduler.frag.batch import RowChooserMixin, RowScoreMixin
from scheduler.frag.fragmentation import node_fragment, shared_fragment_after
from scheduler.framework import CycleState, Profile, register
from scheduler.model import GPU_MILLI, TaskRequest
from scheduler.plugins.balance import balance_terms
from scheduler.plugins.resource_fit import fitting_gpu_mask


def _multi_share(state: CycleState) -> float:
    from scheduler.plugins.fgd import target_workload

    return float(target_workload(state).multi_gpu_share)


@register("fgd_lookahead")
class FgdLookahead(RowScoreMixin):
    name = "fgd_lookahead"
    cacheable = True

    def __init__(
        self,
        m_zero: float = 0.5,
        protect_idle: bool = False,
        pack: float = 0.0,
        mem_weight: float = 0.0,
    ) -> None:
        self.m_zero = m_zero
        self.protect_idle = protect_idle
        self.pack = pack
        self.mem_weight = mem_weight

    def cache_token(self, state: CycleState) -> Hashable:
        return self._scale(state)

    def _scale(self, state: CycleState) -> float:
        return max(0.0, 1.0 - _multi_share(state) / self.m_zero) ** 2

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        arrays: ClusterArrays = state.arrays
        scale = self._scale(state)
        out = np.zeros(len(rows))
        if scale > 0:
            imbalance, _ = balance_terms(arrays, task, rows)
            bal = np.clip(100.0 * (1.0 - imbalance), 0.0, 100.0)
            if self.protect_idle:
                exists = arrays.gpu_exists[rows]
                fresh = (arrays.gpu_count[rows] > 0) & np.all(
                    ~exists | (arrays.gpu_free[rows] == GPU_MILLI), axis=1
                )
                bal = np.where(fresh, 0.0, bal)
            out += scale * bal
        if self.pack:
            cap = arrays.gpu_count[rows] * GPU_MILLI
            idle = np.where(arrays.gpu_exists[rows], arrays.gpu_free[rows], 0).sum(axis=1)
            after = idle - task.total_gpu_milli
            full = np.divide(cap - after, cap, out=np.zeros(len(rows)), where=cap > 0)
            out += self.pack * 100.0 * full
        return out / (1.0 + self.pack)


@register("strand_guard")
class StrandGuard(RowScoreMixin):
    """100 - slope * (GPUs the placement leaves without proportional host memory / CPU).

    After the placement, with fg, fc, fm the node's free fractions of GPU, CPU and memory, the GPUs
    stranded are ``gpu_count * max(0, fg - min(fm, fc if cpu else 1))``. The score is flat (100) on
    every node where nothing is stranded, so it keeps the first-fit ties FGD relies on, and falls by
    ``slope`` points per stranded GPU (25 = FGD's sigmoid slope per 1000 milli at Delta = 0, i.e. a
    stranded GPU counts like a GPU of fragment)."""

    name = "strand_guard"
    cacheable = True

    def __init__(
        self,
        slope: float = 25.0,
        cpu: bool = True,
        gpu_tasks_only: bool = False,
        m_zero: float | None = None,
        cpu_from_workload: bool = False,
        gradient: bool = False,
        linear: bool = False,
    ) -> None:
        self.gradient = gradient
        self.linear = linear
        self.cpu_from_workload = cpu_from_workload
        self.slope = slope
        self.cpu = cpu
        self.gpu_tasks_only = gpu_tasks_only
        self.m_zero = m_zero

    def cache_token(self, state: CycleState) -> Hashable:
        return self._slope(state)

    def _slope(self, state: CycleState) -> float:
        """``slope``, or with ``m_zero`` ``slope * (1 - max(0, 1 - m / m_zero)^2)``: the guard takes
        over as the balance term (scaled by ``max(0, 1 - m / m_zero)^2``) yields to multi-GPU demand."""
        if self.m_zero is None:
            return self.slope
        if self.linear:
            return self.slope * min(1.0, _multi_share(state) / self.m_zero)
        return self.slope * (1.0 - max(0.0, 1.0 - _multi_share(state) / self.m_zero) ** 2)

    def _stranded(
        self, state: CycleState, rows: np.ndarray, cpu: int, mem: int, gpu_milli: int
    ) -> np.ndarray:
        """GPUs on each row left without proportional memory/CPU after taking (cpu, mem, gpu_milli)."""
        arrays: ClusterArrays = state.arrays
        count = arrays.gpu_count[rows]
        cap = np.maximum(count * GPU_MILLI, 1)
        idle = np.where(arrays.gpu_exists[rows], arrays.gpu_free[rows], 0).sum(axis=1)
        fg = (idle - gpu_milli) / cap
        fm = (arrays.mem_free[rows] - mem) / np.maximum(arrays.mem_cap[rows], 1)
        other = fm
        if self.cpu and self.cpu_from_workload:
            # CPU the typical GPU task brings per milli-GPU: idle GPU beyond free CPU / that is stranded.
            from scheduler.plugins.fgd import target_workload

            cpu_m, milli_m, num_m, _, _, probs = target_workload(state).arrays_for(arrays)
            gpu_demand = float((probs * milli_m * num_m).sum())
            cpu_demand = float((probs * cpu_m * (num_m > 0)).sum())
            if gpu_demand > 0:
                per_milli = cpu_demand / gpu_demand
                usable = (arrays.cpu_free[rows] - cpu) / max(per_milli, 1e-9)
                other = np.minimum(fm, usable / cap)
        elif self.cpu:
            fc = (arrays.cpu_free[rows] - cpu) / np.maximum(arrays.cpu_cap[rows], 1)
            other = np.minimum(fm, fc)
        stranded = count * np.clip(fg - other, 0.0, None)
        return stranded

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        if self.gpu_tasks_only and not task.total_gpu_milli:
            return np.full(len(rows), 100.0)
        stranded = self._stranded(state, rows, task.cpu_milli, task.memory_mib, task.total_gpu_milli)
        if self.gradient:
            stranded = np.clip(stranded - self._stranded(state, rows, 0, 0, 0), 0.0, None)
        return np.clip(100.0 - self._slope(state) * stranded, 0.0, 100.0)


def _fine_scores(state: CycleState, task: TaskRequest, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """FGD with an unquantised score for shared tasks: (score per row, best GPU per row or -1)."""
    from scheduler.plugins.fgd import fgd_scores, target_workload

    wl = target_workload(state)
    if not task.is_shared:
        return fgd_scores(state, task, rows, wl)
    arrays: ClusterArrays = state.arrays
    before = node_fragment(wl, arrays, rows)
    after = shared_fragment_after(wl, arrays, rows, task.gpu_milli, task.cpu_milli, task.memory_mib)
    valid = fitting_gpu_mask(arrays, task, rows)
    x = np.clip((before[:, None] - after) / 1000.0, -60.0, 60.0)
    per_gpu = np.where(valid, 100.0 / (1.0 + np.exp(-x)), -1.0)
    best = np.argmax(per_gpu, axis=1)
    return per_gpu[np.arange(len(rows)), best], np.where(valid.any(axis=1), best, -1)


@register("fgd_fine")
class FgdFine(RowScoreMixin):
    """FGD, but a shared task's score is not floored to an integer (whole-GPU and CPU-only tasks keep
    FGD's integer score, whose ties give first-fit packing)."""

    name = "fgd_fine"
    cacheable = True

    def cache_token(self, state: CycleState) -> Hashable:
        from scheduler.plugins.fgd import target_workload

        wl = target_workload(state)
        return (id(wl), wl.version)

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        return _fine_scores(state, task, rows)[0]


@register("fgd_fine_gpus")
class FgdFineGpus(RowChooserMixin):
    """GPU chooser matching ``fgd_fine``: a shared task takes the GPU with the best unfloored score."""

    name = "fgd_fine_gpus"

    def choose_gpus_row(self, state: CycleState, task: TaskRequest, row: int) -> tuple[int, ...] | None:
        rows = np.array([row])
        mask = fitting_gpu_mask(state.arrays, task, rows)[0]
        needed = max(task.gpus, 1)
        if int(mask.sum()) < needed:
            return None
        if task.gpus:
            return tuple(int(i) for i in np.flatnonzero(mask)[:needed])
        best = int(_fine_scores(state, task, rows)[1][0])
        return None if best < 0 else (best,)


def make_candidate(
    name: str = "candidate_lookahead",
    balance_weight: float = 0.5,
    m_zero: float = 0.4,
    protect_idle: bool = False,
    pack: float = 0.0,
    fine: bool = True,
    strand: float = 1.0,
    strand_cpu: bool = True,
    strand_gpu_only: bool = False,
    strand_yield: bool = True,
    strand_slope: float = 25.0,
    strand_cpu_wl: bool = True,
    strand_gradient: bool = True,
    strand_linear: bool = True,
) -> Profile:
    scores = {"fgd_fine" if fine else "fgd": 1.0, "fgd_lookahead": balance_weight * (1.0 + pack)}
    if strand:
        scores["strand_guard"] = strand
    return Profile(
        name=name,
        filters=("resource_fit",),
        scores=scores,
        gpu_chooser="fgd_fine_gpus" if fine else "fgd_gpus",
        args={
            "fgd_lookahead": {"m_zero": m_zero, "protect_idle": protect_idle, "pack": pack},
            "strand_guard": {
                "cpu": strand_cpu,
                "gpu_tasks_only": strand_gpu_only,
                "m_zero": m_zero if strand_yield else None,
                "slope": strand_slope,
                "cpu_from_workload": strand_cpu_wl,
                "gradient": strand_gradient,
                "linear": strand_linear,
            },
        },
        description="FGD + multi-GPU-aware balance + GPU-packing tie-break",
    )


def _register_profiles() -> None:
    from scheduler.profiles import PROFILES

    PROFILES.setdefault("candidate_lookahead", make_candidate)


_register_profiles()

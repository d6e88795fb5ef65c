"""Fragmentation plugins of the ``default`` profile: FGD, refined for shared GPUs, plus two secondary scores.

The ``default`` profile (``scheduler/profiles.py``) scores nodes by

    fgd_fine (weight 1) + balance_yield (weight 0.5) + strand_guard (weight 1),  GPU chooser fgd_fine_gpus

(plus the interference- and topology-aware plugins, neutral on clusters without topology or profiles)

* ``fgd_fine``: FGD's fragmentation gradient (``scheduler.plugins.fgd``), except that a *shared* task's
  score is not floored to an integer, so placements of a GPU share that differ by less than one
  integer step (~40 milli-GPU of expected fragment) are told apart. Whole-GPU and CPU-only tasks keep
  FGD's integer score: their many exact ties go to the first node in the caller's order, the
  first-fit packing FGD depends on. ``fgd_fine_gpus`` picks the GPU with the best unfloored score.
  A shared task's fragment change also looks one task ahead at the gap it leaves on its GPU
  (``gap_option_values``): with ``f(g) = g * P(a shape cannot use a gap of g)`` FGD's per-GPU
  fragment and ``opt(g) = sum_u q_u * min(0, f(g - u) - f(g))`` (u the single-GPU sizes of the
  target workload, q_u their probability) what the next task may save by landing in the gap, a
  share of s milli on a GPU with g free adds ``4 * (opt(g) - opt(g - s) - q_s * min(0, f(g - s) -
  f(g)))`` to Delta (the last term: the share's own size uses its option on the gap) when the node
  is scored (it prefers nodes that keep the gaps the common sizes fill, e.g. a 700 gap for a
  500-milli share, to nodes where the share leaves a gap none fits) and ``1 * (...)`` when
  ``fgd_fine_gpus`` picks the GPU inside the chosen node (see ``GAP_LOOKAHEAD_GPU``).
* ``balance_yield``: the seed strategy's imbalance term (``scheduler.plugins.balance``, no similarity
  term), scaled by ``max(0, 1 - m / m_zero)^2``, m = the share of the target workload's GPU request
  from tasks of 2+ GPUs (``TargetWorkload.multi_gpu_share``), ``m_zero`` = 0.4. Balancing spreads
  work; multi-GPU tasks need whole nodes, so the term fades out as they grow. It also leaves the
  empty nodes that the workload's gang tasks need alone: while the empty G-GPU nodes are no more
  than the gang demand for them (sum over G/2 < k <= G of s_k * idle GPUs / k, s_k the share of the
  GPU request from k-GPU tasks, ``gang_reserved_sizes``), an empty G-GPU node gets the lowest balance
  score among the other candidates, so opening it is FGD's decision, not the balance term's.
* ``strand_guard``: GPUs a placement newly leaves without the host memory or CPU to use them. After a
  placement on node n, with G GPUs, idle GPU fraction fg and free memory fraction fm, and free CPU
  c: the GPUs stranded are ``G * max(0, fg - min(fm, c / (r * 1000 G)))`` where r is the CPU the
  target workload's GPU tasks bring per milli-GPU (sum p_m cpu_m / sum p_m milli_m k_m); memory is
  judged against the node's own memory per GPU (the target workload has no memory). The score is
  ``100 - slope * max(0, stranded after - stranded before)``, flat 100 wherever the placement
  strands nothing more, so it keeps FGD's ties. ``slope = 25 * min(1, m / m_zero)^2``: 25 points
  per GPU is FGD's sigmoid slope per 1000 milli at Delta = 0 (a stranded GPU counts like a GPU of
  fragment), and the guard ramps in (quadratically: at m = 0.07, as in ``default``, it is 0.8
  points per GPU, almost off) as the balance term fades out. It also ramps in with CPU pressure:
  ``slope = 25 * max(min(1, m / m_zero)^2, clip((kappa - 0.8) / 0.2, 0, 1)^2)``, kappa = CPU used
  per milli-GPU used on the GPU nodes over their CPU per milli-GPU of capacity (``cpu_pressure``);
  at kappa near 1 (many CPU-only tasks, e.g. ``cpu250``) CPU runs out with the GPUs and GPUs get
  stranded, at 0.8 or below (``default``, ``cpu050``) nothing changes.

All scores are NumPy over candidate rows and cacheable per task shape (the engine's batch protocol).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.fit import fitting_gpu_mask
from scheduler.engine.row_adapters import RowChooserMixin, RowScoreMixin
from scheduler.frag.fragmentation import TargetWorkload
from scheduler.framework import CycleState, register
from scheduler.model import GPU_MILLI, Node, TaskRequest
from scheduler.plugins.balance import balance_terms
from scheduler.plugins.fgd import fgd_scores, target_workload

# Multi-GPU share of the GPU request at which the balance term is gone and the strand guard is at
# full strength. Chosen on the in-sample workloads (see docs/benchmarks/frag.md).
M_ZERO = 0.4
# FGD's score slope at Delta = 0: 100 * sigmoid'(0) / 1000 per milli = 25 points per GPU.
FGD_SLOPE_PER_GPU = 25.0
# CPU pressure (CPU the running work uses per milli-GPU, over the cluster's CPU per milli-GPU) at
# which the strand guard starts to ramp in regardless of m, and at which it is at full strength.
PRESSURE_FROM = 0.8
PRESSURE_FULL = 1.0
# Below this share of the cluster's GPUs in use, the pressure comes from the target workload's shapes.
PRESSURE_MIN_USED = 0.05
# Weight of the gap look-ahead in a shared task's fragment change (``gap_option_values``): 4 when
# the node is scored, 1 when the GPU inside the chosen node is picked. With 4 in the chooser too,
# shares kept out of gaps on all-shared workloads (``gpushare100``, seed 42: 16.01 % unallocated at
# arrived 100 % vs 12.70); with 8 for the node score, ``gpushare80`` 13.43 vs 10.62 (seeds 42-43).
GAP_LOOKAHEAD = 4.0
GAP_LOOKAHEAD_GPU = 1.0


def _workload(state: CycleState) -> TargetWorkload:
    return target_workload(state)


def _clip(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """``np.clip(x, low, high)``, which is ``minimum(maximum(x, low), high)``, without its per-call
    overhead (it dominates on the few rows a placement scores)."""
    return np.minimum(np.maximum(x, low), high)


def _multi_share(state: CycleState) -> float:
    return float(_workload(state).multi_gpu_share)


def empty_rows(arrays: ClusterArrays, rows: np.ndarray) -> np.ndarray:
    """Rows of GPU nodes nothing runs on (every GPU idle, all CPU free)."""
    idle = np.where(arrays.gpu_exists[rows], arrays.gpu_free[rows], 0).sum(axis=1)
    return (
        (arrays.gpu_count[rows] > 0)
        & (idle == arrays.gpu_count[rows] * GPU_MILLI)
        & (arrays.cpu_free[rows] == arrays.cpu_cap[rows])
    )


def _idle_and_empty(arrays: ClusterArrays) -> tuple[np.ndarray, np.ndarray]:
    """Idle milli-GPU and ``empty_rows`` of every row, memoised on the arrays per row version."""
    memo = arrays.memo.get("balance_yield.idle_empty")
    if memo is None or len(memo[0]) != arrays.n:
        memo = (np.full(arrays.n, -1, dtype=np.int64), np.zeros(arrays.n), np.zeros(arrays.n, dtype=bool))
        arrays.memo["balance_yield.idle_empty"] = memo
    stamp, idle, empty = memo
    stale = np.flatnonzero(stamp != arrays.version)
    if stale.size:
        idle[stale] = np.where(arrays.gpu_exists[stale], arrays.gpu_free[stale], 0).sum(axis=1)
        empty[stale] = empty_rows(arrays, stale)
        stamp[stale] = arrays.version[stale]
    return idle, empty


def gang_reserved_sizes(state: CycleState) -> tuple[int, ...]:
    """GPU counts G of the nodes whose empty ones the balance term must leave to gang tasks.

    The target workload's k-GPU tasks (k >= 2) ask for the share s_k of its GPU request; if the cluster
    fills up, they will want ``s_k * idle GPUs / k`` more nodes. A k-GPU task fits only where k GPUs are
    idle, in practice an empty node of G GPUs with G/2 < k <= G. G is reserved while the empty G-GPU
    nodes are no more than that demand: sum over G/2 < k <= G of s_k * idle GPUs / k.

    The counts are the snapshot's. A caller whose snapshot leaves nodes out (the simulator offers
    only nodes with free GPUs, and of identical ones only as many as the call has tasks) gives what
    the left-out nodes add in ``CycleState.data["gang_counts_outside"]``: ``(free milli-GPU,
    {G: empty G-GPU nodes})``, so the reservation sees the whole cluster.
    """
    wl = _workload(state)
    shares = wl.gang_gpu_share
    if not shares:
        return ()
    arrays: ClusterArrays = state.arrays
    outside = state.data.get("gang_counts_outside")
    # Asked for every placement (the balance term's cache token): memoised until a row changes
    # (every write bumps a row's version, so the sum of versions only grows).
    stamp = int(arrays.version.sum())
    memo = arrays.memo.get("gang_reserved_sizes")
    if (
        memo is not None
        and memo[0] == stamp
        and memo[1] is wl
        and memo[2] == wl.version
        and memo[3] is outside
    ):
        hit: tuple[int, ...] = memo[4]
        return hit
    idle, empty = _idle_and_empty(arrays)
    idle_milli = float(idle.sum())
    nodes_by_size = np.bincount(arrays.gpu_count)
    empty_by_size = np.bincount(arrays.gpu_count[empty], minlength=len(nodes_by_size))
    if outside is not None:
        extra_milli, extra_empty = outside
        idle_milli += float(extra_milli)
        top = max([len(nodes_by_size) - 1, *extra_empty])
        nodes_by_size = np.bincount(arrays.gpu_count, minlength=top + 1)
        empty_by_size = np.bincount(arrays.gpu_count[empty], minlength=top + 1)
        for size, count in extra_empty.items():
            nodes_by_size[size] += count
            empty_by_size[size] += count
    idle_gpus = idle_milli / GPU_MILLI
    reserved = []
    for size in np.flatnonzero(nodes_by_size[1:]).tolist():
        size += 1
        demand = sum(s * idle_gpus / k for k, s in shares.items() if size / 2 < k <= size)
        if demand > 0 and int(empty_by_size[size]) <= demand:
            reserved.append(size)
    result = tuple(reserved)
    arrays.memo["gang_reserved_sizes"] = (stamp, wl, wl.version, outside, result)
    return result


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
        return max(0.0, 1.0 - _multi_share(state) / self.m_zero) ** 2

    def _reserved(self, state: CycleState) -> tuple[int, ...]:
        return gang_reserved_sizes(state) if self.reserve_for_gangs else ()

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        scale = self._scale(state)
        if scale <= 0:
            return np.zeros(len(rows))
        imbalance, _ = balance_terms(state.arrays, task, rows, similarity=False)
        score = scale * _clip(100.0 * (1.0 - imbalance), 0.0, 100.0)
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


def _shape_cpu_pressure(state: CycleState) -> float:
    """``cpu_pressure`` from the target workload's shapes: their CPU per milli-GPU over the cluster's."""
    wl = _workload(state)
    arrays: ClusterArrays = state.arrays
    key = ("cpu_pressure", id(wl))
    memo = arrays.memo.get(key)
    if memo is not None and memo[0] is wl and memo[1] == wl.version:
        hit: float = memo[2]
        return hit
    cpu_m, milli_m, num_m, _, _, probs = wl.arrays_for(arrays)
    gpu_demand = float((probs * milli_m * num_m).sum())
    cpu_demand = float((probs * cpu_m).sum())
    gpu_nodes = arrays.gpu_count > 0
    cap_gpu = float(arrays.gpu_count.sum()) * GPU_MILLI
    cap_cpu = float(arrays.cpu_cap[gpu_nodes].sum())
    value = (cpu_demand / gpu_demand) * cap_gpu / cap_cpu if gpu_demand > 0 and cap_cpu > 0 else 0.0
    arrays.memo[key] = (wl, wl.version, value)
    return value


def cpu_pressure(state: CycleState, step: float = 0.02) -> float:
    """How scarce CPU is relative to GPUs for the work the cluster runs: on the GPU nodes, CPU used per
    milli-GPU used over CPU capacity per milli-GPU of capacity, rounded to ``step``. Near 1 (CPU-only
    tasks add a lot of CPU) the GPUs run out of CPU before they fill up. Until ``PRESSURE_MIN_USED`` of
    the GPUs are in use, it comes from the target workload's shapes (``_shape_cpu_pressure``; their
    95 % cut drops rare GPU shapes, which biases it up, hence the cluster's own figure once there is one).
    """
    arrays: ClusterArrays = state.arrays
    # Asked for every placement (the strand guard's cache token): memoised until a row changes
    # (every write bumps a row's version, so the sum of versions only grows) or the workload does.
    wl = _workload(state)
    key = (int(arrays.version.sum()), id(wl), wl.version, step)
    memo = arrays.memo.get("cpu_pressure")
    if memo is not None and memo[0] == key and memo[1] is wl:
        hit: float = memo[2]
        return hit
    gpu_nodes = arrays.gpu_count > 0
    cap_gpu = float(arrays.gpu_count.sum()) * GPU_MILLI
    cap_cpu = float(arrays.cpu_cap[gpu_nodes].sum())
    used_gpu = cap_gpu - float(arrays.gpu_free[arrays.gpu_exists].sum())
    if cap_cpu <= 0 or used_gpu <= 0 or used_gpu < PRESSURE_MIN_USED * cap_gpu:
        value = _shape_cpu_pressure(state)
    else:
        used_cpu = float((arrays.cpu_cap[gpu_nodes] - arrays.cpu_free[gpu_nodes]).sum())
        value = round(used_cpu / used_gpu * cap_gpu / cap_cpu / step) * step
    arrays.memo["cpu_pressure"] = (key, wl, value)
    return value


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
        wl = _workload(state)
        return (id(wl), wl.version, self._slope(state))

    def _slope(self, state: CycleState) -> float:
        """``slope * max(min(1, m / m_zero)^power, ramp^2)`` (``slope`` when ``m_zero`` is None), ramp =
        ``clip((kappa - pressure_from) / (pressure_full - pressure_from), 0, 1)``, kappa = ``cpu_pressure``."""
        if self.m_zero is None:
            return self.slope
        base = self.slope * min(1.0, _multi_share(state) / self.m_zero) ** self.power
        if self.pressure_from is None:
            return base
        kappa = cpu_pressure(state)
        ramp = min(1.0, max(0.0, (kappa - self.pressure_from) / (self.pressure_full - self.pressure_from)))
        return max(base, self.slope * ramp**2)

    def _cpu_per_milli(self, state: CycleState) -> float:
        """CPU milli the target workload's GPU tasks bring per milli-GPU (0 if it has none)."""
        wl = _workload(state)
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
        return _clip(100.0 - slope * added, 0.0, 100.0)


def unfloored_sigmoid(delta: np.ndarray) -> np.ndarray:
    """100 * sigmoid(delta / 1000): FGD's score without the floor to an integer."""
    x = _clip(np.asarray(delta, dtype=float) / 1000.0, -60.0, 60.0)
    return 100.0 / (1.0 + np.exp(-x))


_GAP_TABLES: dict[int, tuple[TargetWorkload, int, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}


def gap_option_values(wl: TargetWorkload, arrays: ClusterArrays) -> np.ndarray:
    """opt[g] for g = 0..1000 milli free on one GPU: how much a gap of g lowers the expected fragment
    because the workload's next task may fill it (<= 0).

    Per GPU, FGD's fragment of a gap g is ``f(g) = g * P(a shape cannot use g)`` (a shape uses g if it
    asks for one GPU of at most g milli). A next task of single-GPU size u <= g, probability q_u
    (summed over the shapes of that size), can land in the gap and leave ``f(g - u)``:
    ``opt(g) = sum_{u <= g} q_u * min(0, f(g - u) - f(g))``. Memoised per workload.
    """
    return _gap_tables(wl, arrays)[0]


def _gap_tables(wl: TargetWorkload, arrays: ClusterArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(opt, f, q) on g = 0..1000: ``gap_option_values``, the per-GPU fragment f and q[u] the
    probability of single-GPU size u. Memoised per workload."""
    # They depend on the workload only: memoised per workload across arrays (the simulator builds
    # new arrays for every call). The entry holds the workload, so its id is not reused meanwhile.
    memo = _GAP_TABLES.get(id(wl))
    if memo is not None and memo[0] is wl and memo[1] == wl.version:
        hit: tuple[np.ndarray, np.ndarray, np.ndarray] = memo[2]
        return hit
    probs = np.asarray(wl.probs, dtype=float)
    milli = np.array([s[1] for s in wl.shapes], dtype=np.int64)
    num = np.array([s[2] for s in wl.shapes], dtype=np.int64)
    grid = np.arange(0, GPU_MILLI + 1)
    usable = (num[None, :] == 1) & (milli[None, :] <= grid[:, None])
    f = grid * (probs[None, :] * ~usable).sum(axis=1)
    opt = np.zeros(len(grid))
    q_of = np.zeros(len(grid))
    single = (num == 1) & (milli > 0)
    for u in np.unique(milli[single]).tolist():
        q = probs[single & (milli == u)].sum()
        q_of[u] = q
        gaps = grid[grid >= u]
        opt[gaps] += q * np.minimum(0.0, f[gaps - u] - f[gaps])
    tables = (opt, f, q_of)
    if len(_GAP_TABLES) >= 8:
        _GAP_TABLES.clear()
    _GAP_TABLES[id(wl)] = (wl, wl.version, tables)
    return tables


def fine_scores(
    state: CycleState, task: TaskRequest, rows: np.ndarray, lookahead: float = GAP_LOOKAHEAD
) -> tuple[np.ndarray, np.ndarray]:
    """FGD with an unfloored score for shared tasks: (score per row, best GPU per row or -1).

    A shared task of s milli on GPU i (g_i free) adds ``lookahead * (opt(g_i) - opt(g_i - s) -
    q_s * min(0, f(g_i - s) - f(g_i)))`` to FGD's fragment change (``gap_option_values``): a gap the
    workload's common sizes fill well is worth keeping, a gap only rare sizes fit is not. The last
    term: the task placed now is the workload's draw of size s, so the option its size had on the
    gap is used, not lost (without it an exact fit by a common size scored like a loss: the default
    profile then broke an idle GPU for a 400-milli share next to a 400-milli gap on a cluster running
    600 + 400). Whole-GPU and CPU-only tasks: plain FGD.
    """
    wl = _workload(state)
    if not task.is_shared or lookahead == 0:
        return fgd_scores(state, task, rows, wl, shared_score=unfloored_sigmoid)
    opt, f, q = _gap_tables(wl, state.arrays)
    g = _clip(state.arrays.gpu_free[rows], 0, GPU_MILLI)
    left = np.maximum(g - task.gpu_milli, 0)
    change = opt[g] - opt[left] - q[task.gpu_milli] * np.minimum(0.0, f[left] - f[g])

    def with_lookahead(delta: np.ndarray) -> np.ndarray:
        return unfloored_sigmoid(delta + lookahead * change)

    return fgd_scores(state, task, rows, wl, shared_score=with_lookahead)


@register("fgd_fine")
class FgdFine(RowScoreMixin):
    """FGD, but a shared task's score is not floored (whole-GPU and CPU-only tasks keep FGD's)."""

    name = "fgd_fine"
    cacheable = True

    def __init__(self, lookahead: float = GAP_LOOKAHEAD) -> None:
        self.lookahead = lookahead

    def cache_token(self, state: CycleState) -> Hashable:
        wl = _workload(state)
        return (id(wl), wl.version)

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        return fine_scores(state, task, rows, self.lookahead)[0]


@register("fgd_fine_gpus")
class FgdFineGpus(RowChooserMixin):
    """GPU chooser matching ``fgd_fine``: a shared task takes the GPU with the best unfloored score,
    whole GPUs the first k idle ones."""

    name = "fgd_fine_gpus"

    def __init__(self, lookahead: float = GAP_LOOKAHEAD_GPU) -> None:
        self.lookahead = lookahead

    def choose_gpus_row(self, state: CycleState, task: TaskRequest, row: int) -> tuple[int, ...] | None:
        rows = np.array([row])
        mask = fitting_gpu_mask(state.arrays, task, rows)[0]
        needed = max(task.gpus, 1)
        if int(mask.sum()) < needed:
            return None
        if task.gpus:
            return tuple(int(i) for i in np.flatnonzero(mask)[:needed])
        fitting = np.flatnonzero(mask)
        free = state.arrays.gpu_free[row, fitting]
        if (free == free[0]).all():
            # A shared task's score depends on its GPU only through the GPU's free milli-GPU, so
            # equally free GPUs tie, and ties go to the first (e.g. only idle GPUs admitted).
            return (int(fitting[0]),)
        best = int(fine_scores(state, task, rows, self.lookahead)[1][0])
        return None if best < 0 else (best,)

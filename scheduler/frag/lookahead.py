"""The look-ahead math of the ``default`` profile's fragmentation plugins: FGD refined for shared GPUs
(gap tables), CPU pressure and gang reservations, for two secondary scores.

The plugins (``scheduler.plugins.fgd_fine``, ``fgd_fine_gpus``, ``balance_yield``, ``strand_guard``)
only adapt these functions to the engine's batch protocol.

The ``default`` profile (``scheduler/profiles.py``) scores nodes by

    fgd_fine (weight 1) + balance_yield (weight 0.5) + strand_guard (weight 1),  GPU chooser fgd_fine_gpus

(plus the interference- and topology-aware plugins, neutral on clusters without topology or profiles)

* ``fgd_fine``: FGD's fragmentation gradient (``scheduler.frag.fgd_scores``), except that a *shared* task's
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
* ``balance_yield``: the seed strategy's imbalance term (``scheduler.frag.balance_terms``, no
  similarity term), scaled by ``max(0, 1 - m / m_zero)^2``, m = the share of the target workload's GPU request
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

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.frag.fgd_scores import fgd_scores, target_workload
from scheduler.frag.fragmentation import TargetWorkload
from scheduler.framework import CycleState
from scheduler.model import GPU_MILLI, TaskRequest

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


def clip(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """``np.clip(x, low, high)``, which is ``minimum(maximum(x, low), high)``, without its per-call
    overhead (it dominates on the few rows a placement scores)."""
    return np.minimum(np.maximum(x, low), high)


def multi_gpu_share(state: CycleState) -> float:
    return float(target_workload(state).multi_gpu_share)


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
    wl = target_workload(state)
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


def _shape_cpu_pressure(state: CycleState) -> float:
    """``cpu_pressure`` from the target workload's shapes: their CPU per milli-GPU over the cluster's."""
    wl = target_workload(state)
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
    wl = target_workload(state)
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


def unfloored_sigmoid(delta: np.ndarray) -> np.ndarray:
    """100 * sigmoid(delta / 1000): FGD's score without the floor to an integer."""
    x = clip(np.asarray(delta, dtype=float) / 1000.0, -60.0, 60.0)
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
    wl = target_workload(state)
    if not task.is_shared or lookahead == 0:
        return fgd_scores(state, task, rows, wl, shared_score=unfloored_sigmoid)
    opt, f, q = _gap_tables(wl, state.arrays)
    g = clip(state.arrays.gpu_free[rows], 0, GPU_MILLI)
    left = np.maximum(g - task.gpu_milli, 0)
    change = opt[g] - opt[left] - q[task.gpu_milli] * np.minimum(0.0, f[left] - f[g])

    def with_lookahead(delta: np.ndarray) -> np.ndarray:
        return unfloored_sigmoid(delta + lookahead * change)

    return fgd_scores(state, task, rows, wl, shared_score=with_lookahead)

"""Fragmentation of nodes against a target workload (FGD, Weng et al., USENIX ATC'23), vectorised.

Target workload M: task shapes m = (cpu_m, milli_m per GPU, k_m GPUs, allowed models) with
probabilities p_m: the most frequent shapes covering ``coverage`` (95 %) of the tasks, renormalised.

Fragment of node n (free CPU c_n, free milli-GPU g_{n,1..G}, idle G_n = sum_i g_{n,i}) for shape m:

    F_n(m) = G_n                                   if k_m = 0 (a CPU-only task uses no GPU),
                                                   or n's model is not allowed for m,
                                                   or c_n < cpu_m, or #{i: g_{n,i} >= milli_m} < k_m
           = sum_{i: g_{n,i} < milli_m} g_{n,i}     otherwise (GPUs individually too small for m)

and F_n(M) = sum_m p_m F_n(m). With ``with_memory`` the fit test also asks for free host memory
>= mem_m (an extension: FGD itself ignores memory).

FGD scores a task on a node by the fragment it adds: Delta = F_n(M) - F_{n'}(M), where n' is n after
placing the task (on the best GPU for a shared task, on the first k idle GPUs for whole GPUs), and
score = floor(100 * sigmoid(Delta / 1000)).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.model import GPU_MILLI, TaskRequest

ShapeKey = tuple[int, int, int, tuple[str, ...], int]


def task_shape(task: TaskRequest, with_memory: bool = False) -> ShapeKey:
    """(cpu, milli per GPU, number of GPUs, allowed models, memory or 0)."""
    if task.gpus:
        milli, num = GPU_MILLI, task.gpus
    elif task.gpu_milli:
        milli, num = task.gpu_milli, 1
    else:
        milli, num = 0, 0
    return (task.cpu_milli, milli, num, tuple(task.gpu_models), task.memory_mib if with_memory else 0)


@dataclass
class TargetWorkload:
    """The typical task shapes M and their probabilities p_m."""

    shapes: list[ShapeKey]
    probs: np.ndarray
    with_memory: bool = False
    # Bumped by whoever replaces the shapes, so score caches know to start over.
    version: int = 0
    # Share of all tasks' GPU request (before the coverage cut) from tasks of 2+ GPUs.
    multi_gpu_share: float = 0.0
    # The same split by GPU count k >= 2: {k: share of the GPU request from k-GPU tasks}.
    gang_gpu_share: dict[int, float] = field(default_factory=dict)
    _per_models: dict[tuple[str, ...], tuple[np.ndarray, ...]] = field(default_factory=dict, repr=False)
    # (version, distinct milli-GPU levels, level of each shape): see ``_levels``.
    _level_cache: tuple[int, np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @classmethod
    def from_tasks(
        cls, tasks: Iterable[TaskRequest], coverage: float = 0.95, with_memory: bool = False
    ) -> TargetWorkload:
        counts = Counter(task_shape(t, with_memory) for t in tasks)
        return cls.from_counts(counts, coverage, with_memory)

    @classmethod
    def from_counts(
        cls, counts: Counter[ShapeKey], coverage: float = 0.95, with_memory: bool = False
    ) -> TargetWorkload:
        total = sum(counts.values())
        if total == 0:
            return cls([], np.zeros(0), with_memory)
        # Most frequent first; ties by cpu, milli, GPU count, models (all descending), as the reference.
        ordered = sorted(
            counts.items(),
            key=lambda kv: (kv[1], kv[0][0], kv[0][1], kv[0][2], "|".join(kv[0][3])),
            reverse=True,
        )
        kept: list[tuple[ShapeKey, int]] = []
        acc = 0
        for shape, count in ordered:
            kept.append((shape, count))
            acc += count
            if acc >= coverage * total:
                break
        probs = np.array([c for _, c in kept], dtype=float)
        demand = sum(c * s[1] * s[2] for s, c in counts.items())
        multi = sum(c * s[1] * s[2] for s, c in counts.items() if s[2] >= 2)
        gang: dict[int, float] = {}
        for s, c in counts.items():
            if s[2] >= 2 and demand:
                gang[s[2]] = gang.get(s[2], 0.0) + c * s[1] * s[2] / demand
        return cls(
            [s for s, _ in kept],
            probs / probs.sum(),
            with_memory,
            multi_gpu_share=multi / demand if demand else 0.0,
            gang_gpu_share=gang,
        )

    def arrays_for(self, arrays: ClusterArrays) -> tuple[np.ndarray, ...]:
        """(cpu, milli, num, mem, access[S, n_models], probs) aligned with ``arrays.models``."""
        key = tuple(arrays.models)
        cached = self._per_models.get(key)
        if cached is None:
            cpu = np.array([s[0] for s in self.shapes], dtype=np.int64)
            milli = np.array([s[1] for s in self.shapes], dtype=np.int64)
            num = np.array([s[2] for s in self.shapes], dtype=np.int64)
            mem = np.array([s[4] for s in self.shapes], dtype=np.int64)
            access = np.array(
                [[(not s[3]) or (m in s[3]) for m in arrays.models] for s in self.shapes], dtype=bool
            ).reshape(len(self.shapes), len(arrays.models))
            # A shape without GPUs never "fits" in the fragment sense: all idle GPU is a fragment.
            access &= (num > 0)[:, None]
            cached = (cpu, milli, num, mem, access, self.probs)
            self._per_models[key] = cached
        return cached


def _levels(wl: TargetWorkload) -> tuple[np.ndarray, np.ndarray]:
    """(distinct milli-per-GPU values U of the shapes, index into U of each shape).

    Counting "GPUs with free >= milli" and "free below milli" depends on a shape only through its
    milli-GPU, and a workload has far fewer distinct values than shapes (16 vs 127 on ``gpuspec33``),
    so the (rows, GPUs, ...) comparisons run per level and are gathered per shape afterwards.
    """
    cached = wl._level_cache
    if cached is None or cached[0] != wl.version:
        milli = np.array([s[1] for s in wl.shapes], dtype=np.int64)
        levels, inverse = np.unique(milli, return_inverse=True)
        cached = wl._level_cache = (wl.version, levels, inverse.reshape(-1))
    return cached[1], cached[2]


def _level_terms(levels: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row and level u: (#GPUs with free >= u, sum of the free milli below u); shapes (R, U)."""
    big = g[:, :, None] >= levels[None, None, :]  # (R, G, U)
    return big.sum(axis=1), np.where(big, 0, g[:, :, None]).sum(axis=1)


def _fragment_from_terms(
    wl: TargetWorkload,
    arrays: ClusterArrays,
    rows: np.ndarray,
    count_u: np.ndarray,
    small_u: np.ndarray,
    idle: np.ndarray,
    c: np.ndarray,
    mfree: np.ndarray,
) -> np.ndarray:
    """F_n(M) from the per-level terms (the same integers, hence the same floats, as per shape)."""
    cpu, _, num, mem, access, probs = wl.arrays_for(arrays)
    _, inverse = _levels(wl)
    count = np.take(count_u, inverse, axis=1)  # (R, S), C order like the per-shape version's
    fits = access[:, arrays.model_id[rows]].T & (count >= num[None, :]) & (c[:, None] >= cpu[None, :])
    if wl.with_memory:
        fits &= mfree[:, None] >= mem[None, :]
    per_shape = np.where(fits, np.take(small_u, inverse, axis=1), idle.astype(float)[:, None])
    result: np.ndarray = per_shape @ probs
    return result


@dataclass
class _RowTerms:
    """Per (cluster arrays, workload): each row's level terms, stamped with the row's
    ``ClusterArrays.version``. A placement changes one row, so the next call recounts one row instead
    of all candidates; ``wl`` is held so its id cannot be reused while this lives.

    Only integers are kept. The float F_n(M) = per_shape @ probs is recomputed by every call on the
    batch it is asked for: a BLAS product's rounding depends on the batch (row position and count),
    and FGD compares F before and after a placement computed in the same batch, so that e.g. a
    CPU-only task on a node with no GPU fragment scores exactly sigmoid(0) rather than 49.
    """

    wl: TargetWorkload
    wl_version: int
    stamp: np.ndarray
    count_u: np.ndarray
    small_u: np.ndarray
    idle: np.ndarray


def _row_terms(wl: TargetWorkload, arrays: ClusterArrays, rows: np.ndarray) -> _RowTerms:
    """The memo of ``wl`` on ``arrays``, fresh on ``rows``."""
    key = ("fragment_terms", id(wl))
    memo = arrays.memo.get(key)
    if not isinstance(memo, _RowTerms) or memo.wl is not wl or memo.wl_version != wl.version:
        n, u = arrays.n, len(_levels(wl)[0])
        memo = _RowTerms(
            wl=wl,
            wl_version=wl.version,
            stamp=np.full(n, -1, dtype=np.int64),
            count_u=np.zeros((n, u), dtype=np.int64),
            small_u=np.zeros((n, u), dtype=np.int64),
            idle=np.zeros(n, dtype=np.int64),
        )
        arrays.memo[key] = memo
    stale = rows[memo.stamp[rows] != arrays.version[rows]]
    if stale.size:
        g = arrays.gpu_free[stale]
        count_u, small_u = _level_terms(_levels(wl)[0], g)
        memo.count_u[stale] = count_u
        memo.small_u[stale] = small_u
        memo.idle[stale] = g.sum(axis=1)
        memo.stamp[stale] = arrays.version[stale]
    return memo


def node_fragment(
    wl: TargetWorkload,
    arrays: ClusterArrays,
    rows: np.ndarray,
    gpu_free: np.ndarray | None = None,
    cpu_free: np.ndarray | None = None,
    mem_free: np.ndarray | None = None,
) -> np.ndarray:
    """F_n(M) in milli-GPU for ``rows`` (optionally with hypothetical free GPU/CPU/memory).

    The current state's integer terms are memoised per row (``_row_terms``); hypothetical ones are
    counted here.
    """
    rows = np.asarray(rows)
    if not wl.shapes:
        return np.zeros(len(rows))
    if gpu_free is None:
        memo = _row_terms(wl, arrays, rows)
        c = arrays.cpu_free[rows] if cpu_free is None else cpu_free
        mfree = arrays.mem_free[rows] if mem_free is None else mem_free
        return _fragment_from_terms(
            wl, arrays, rows, memo.count_u[rows], memo.small_u[rows], memo.idle[rows], c, mfree
        )
    c = arrays.cpu_free[rows] if cpu_free is None else cpu_free
    mfree = arrays.mem_free[rows] if mem_free is None else mem_free
    count_u, small_u = _level_terms(_levels(wl)[0], gpu_free)
    return _fragment_from_terms(wl, arrays, rows, count_u, small_u, gpu_free.sum(axis=1), c, mfree)


def fragment_after_whole(
    wl: TargetWorkload,
    arrays: ClusterArrays,
    rows: np.ndarray,
    taken: np.ndarray,
    cpu_p: int,
    mem_p: int,
) -> np.ndarray:
    """F_{n'}(M): n' = n with ``taken`` (per row) idle GPUs (free = 1000) taken whole, and
    ``cpu_p``/``mem_p`` taken from the node. From the memoised terms: a taken GPU leaves the
    ">= u" count of every level u <= 1000 and joins it only at u = 0; the "below u" sums never held it
    (1000 is never below a level) and a GPU at 0 adds nothing to them."""
    rows = np.asarray(rows)
    if not wl.shapes:
        return np.zeros(len(rows))
    memo = _row_terms(wl, arrays, rows)
    levels = _levels(wl)[0]
    k = np.asarray(taken, dtype=np.int64)[:, None]
    count_u = memo.count_u[rows] - k * (levels <= GPU_MILLI)[None, :] + k * (levels <= 0)[None, :]
    small_u = memo.small_u[rows] - k * GPU_MILLI * (levels > GPU_MILLI)[None, :]
    idle = memo.idle[rows] - GPU_MILLI * k[:, 0]
    return _fragment_from_terms(
        wl,
        arrays,
        rows,
        count_u,
        small_u,
        idle,
        arrays.cpu_free[rows] - cpu_p,
        arrays.mem_free[rows] - mem_p,
    )


def _shared_per_shape_reference(
    g: np.ndarray,
    milli: np.ndarray,
    count: np.ndarray,
    small: np.ndarray,
    milli_p: int,
    base_fit: np.ndarray,
    num: np.ndarray,
    idle_after: np.ndarray,
) -> np.ndarray:
    """Per (row, GPU, shape) fragment after the placement, (R, G, S), written exactly as the per-shape
    version always computed it: the memory layout NumPy picks for this chain decides which BLAS
    kernel the product with ``probs`` runs, hence its rounding (see ``_RowTerms``)."""
    big = g[:, None, :] >= milli[None, :, None]  # (R, S, G)
    v = g - milli_p
    old_big = big.transpose(0, 2, 1)  # (R, G, S)
    new_big = v[:, :, None] >= milli[None, None, :]
    count_after = count[:, None, :] - old_big + new_big
    small_after = (
        small[:, None, :] - np.where(old_big, 0, g[:, :, None]) + np.where(new_big, 0, v[:, :, None])
    )
    fits = base_fit[:, None, :] & (count_after >= num[None, None, :])
    per_shape: np.ndarray = np.where(fits, small_after, idle_after[:, None, None])
    return per_shape


def _probe_layout(r: int, gn: int, s: int) -> bool | None:
    """The layout of ``_shared_per_shape_reference``'s result for R rows: True when GPUs are its
    fastest axis ((R, S, G) in memory), False when it is C-ordered (R, G, S), None otherwise. Found
    by running the chain on placeholder arrays of the same shapes and dtypes: NumPy decides the
    layout from shapes and strides alone."""
    probe = _shared_per_shape_reference(
        np.zeros((r, gn), dtype=np.int64),
        np.zeros(s, dtype=np.int64),
        np.zeros((r, s), dtype=np.int64),
        np.zeros((r, s), dtype=np.int64),
        0,
        # As built in ``shared_fragment_after``: the access table's columns picked per row,
        # transposed, and-ed with an (R, S) comparison.
        np.zeros((s, 2), dtype=bool)[:, np.zeros(r, dtype=np.int64)].T & np.zeros((r, s), dtype=bool),
        np.zeros(s, dtype=np.int64),
        np.zeros(r),
    )
    item = probe.itemsize
    if probe.strides == (s * gn * item, s * item, item):
        return False
    if probe.strides == (s * gn * item, item, gn * item):
        return True
    return None


# (G, S) -> the largest R whose reference result is C-ordered; above it GPUs are the fastest axis.
_LAYOUT_SWITCH: dict[tuple[int, int], int] = {}
# Above this many rows the layout is probed for each R (and remembered), not inferred.
_LAYOUT_SEARCH_MAX = 4096
_LAYOUTS: dict[tuple[int, int, int], bool | None] = {}


def _reference_layout(r: int, gn: int, s: int) -> bool | None:
    """``_probe_layout`` for R rows, cheaply. NumPy switches this chain from C order to GPUs-fastest
    once it is large enough (around 32k elements; it depends only on the sizes), so the switch point
    is found once per (G, S) by bisection over R in 1.._LAYOUT_SEARCH_MAX, each step a probe; the
    answer is then a comparison. Layouts other than these two fall back to the reference chain."""
    if r > _LAYOUT_SEARCH_MAX or r < 1:
        key = (r, gn, s)
        if key not in _LAYOUTS:
            _LAYOUTS[key] = _probe_layout(r, gn, s)
        return _LAYOUTS[key]
    switch = _LAYOUT_SWITCH.get((gn, s))
    if switch is None:
        lo, hi = 0, _LAYOUT_SEARCH_MAX + 1  # invariant: lo is C-ordered (or 0), hi is not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _probe_layout(mid, gn, s) is False:
                lo = mid
            else:
                hi = mid
        switch = _LAYOUT_SWITCH[(gn, s)] = lo
        # Above the switch the layout must be GPUs-fastest; anything else means the assumption
        # does not hold for this NumPy, and every size is then probed.
        if switch < _LAYOUT_SEARCH_MAX and _probe_layout(switch + 1, gn, s) is not True:
            _LAYOUT_SWITCH[(gn, s)] = switch = -1
    if switch < 0:
        key = (r, gn, s)
        if key not in _LAYOUTS:
            _LAYOUTS[key] = _probe_layout(r, gn, s)
        return _LAYOUTS[key]
    return r > switch


def shared_fragment_after(
    wl: TargetWorkload, arrays: ClusterArrays, rows: np.ndarray, milli_p: int, cpu_p: int, mem_p: int
) -> np.ndarray:
    """F_{n'}(M) for every (row, GPU i): n' = n with ``milli_p`` taken from GPU i and ``cpu_p``/``mem_p``
    from the node. Shape (R, G). Uses the memoised per-level counts updated for the one changed GPU:

        count'_u = count_u - [g_i >= u] + [g_i - milli_p >= u]
        small'_u = small_u - [g_i < u] g_i + [g_i - milli_p < u] (g_i - milli_p)

    counted per level u and gathered per shape (u = milli_m), then laid out in memory as the
    reference chain would be, so that the product with ``probs`` rounds the same.
    """
    rows = np.asarray(rows)
    g = arrays.gpu_free[rows]
    r, gn = g.shape
    if not wl.shapes:
        return np.zeros((r, gn))
    cpu, milli, num, mem, access, probs = wl.arrays_for(arrays)
    memo = _row_terms(wl, arrays, rows)
    levels, inverse = _levels(wl)
    c = arrays.cpu_free[rows] - cpu_p
    base_fit = access[:, arrays.model_id[rows]].T & (c[:, None] >= cpu[None, :])  # (R, S)
    if wl.with_memory:
        base_fit &= (arrays.mem_free[rows] - mem_p)[:, None] >= mem[None, :]
    idle_after = (memo.idle[rows] - milli_p).astype(float)
    gpus_fastest = _reference_layout(r, gn, len(milli))
    if gpus_fastest is None:
        per_shape = _shared_per_shape_reference(
            g,
            milli,
            np.take(memo.count_u[rows], inverse, axis=1),
            np.take(memo.small_u[rows], inverse, axis=1),
            milli_p,
            base_fit,
            num,
            idle_after,
        )
        result: np.ndarray = per_shape @ probs
        return result
    # Per level: (R, U, G) when GPUs are the fastest axis of the result, else (R, G, U).
    axis = 1 if gpus_fastest else 2
    v = g - milli_p
    if gpus_fastest:
        lv, gg, vv = levels[None, :, None], g[:, None, :], v[:, None, :]
        cnt, sml = memo.count_u[rows][:, :, None], memo.small_u[rows][:, :, None]
    else:
        lv, gg, vv = levels[None, None, :], g[:, :, None], v[:, :, None]
        cnt, sml = memo.count_u[rows][:, None, :], memo.small_u[rows][:, None, :]
    old_big = gg >= lv
    new_big = vv >= lv
    count_after = np.take(cnt - old_big + new_big, inverse, axis=axis)
    small_after = np.take(sml - np.where(old_big, 0, gg) + np.where(new_big, 0, vv), inverse, axis=axis)
    if gpus_fastest:
        fits = base_fit[:, :, None] & (count_after >= num[None, :, None])
        per_shape = np.where(fits, small_after, idle_after[:, None, None]).transpose(0, 2, 1)
    else:
        fits = base_fit[:, None, :] & (count_after >= num[None, None, :])
        per_shape = np.where(fits, small_after, idle_after[:, None, None])
    result = per_shape @ probs
    return result


def sigmoid_score(delta: np.ndarray) -> np.ndarray:
    """floor(100 * sigmoid(delta / 1000)): the FGD score of a fragment change (higher = less growth)."""
    x = np.clip(np.asarray(delta, dtype=float) / 1000.0, -60.0, 60.0)
    return np.floor(100.0 / (1.0 + np.exp(-x)))

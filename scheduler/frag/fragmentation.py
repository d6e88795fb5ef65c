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

from scheduler.frag.arrays import ClusterArrays
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
    _per_models: dict[tuple[str, ...], tuple[np.ndarray, ...]] = field(default_factory=dict, repr=False)

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
        return cls(
            [s for s, _ in kept],
            probs / probs.sum(),
            with_memory,
            multi_gpu_share=multi / demand if demand else 0.0,
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


def node_fragment(
    wl: TargetWorkload,
    arrays: ClusterArrays,
    rows: np.ndarray,
    gpu_free: np.ndarray | None = None,
    cpu_free: np.ndarray | None = None,
    mem_free: np.ndarray | None = None,
) -> np.ndarray:
    """F_n(M) in milli-GPU for ``rows`` (optionally with hypothetical free GPU/CPU/memory)."""
    g = arrays.gpu_free[rows] if gpu_free is None else gpu_free
    c = arrays.cpu_free[rows] if cpu_free is None else cpu_free
    mfree = arrays.mem_free[rows] if mem_free is None else mem_free
    idle = g.sum(axis=1).astype(float)
    if not wl.shapes:
        return np.zeros(len(idle))
    cpu, milli, num, mem, access, probs = wl.arrays_for(arrays)
    big = g[:, None, :] >= milli[None, :, None]  # (R, S, G)
    count = big.sum(axis=2)
    frag_small = np.where(big, 0, g[:, None, :]).sum(axis=2)
    fits = access[:, arrays.model_id[rows]].T & (count >= num[None, :]) & (c[:, None] >= cpu[None, :])
    if wl.with_memory:
        fits &= mfree[:, None] >= mem[None, :]
    per_shape = np.where(fits, frag_small, idle[:, None])
    return per_shape @ probs


def shared_fragment_after(
    wl: TargetWorkload, arrays: ClusterArrays, rows: np.ndarray, milli_p: int, cpu_p: int, mem_p: int
) -> np.ndarray:
    """F_{n'}(M) for every (row, GPU i): n' = n with ``milli_p`` taken from GPU i and ``cpu_p``/``mem_p``
    from the node. Shape (R, G). Uses per-shape counts updated for the one changed GPU:

        count'_m = count_m - [g_i >= milli_m] + [g_i - milli_p >= milli_m]
        small'_m = small_m - [g_i < milli_m] g_i + [g_i - milli_p < milli_m] (g_i - milli_p)
    """
    g = arrays.gpu_free[rows]
    c = arrays.cpu_free[rows] - cpu_p
    mfree = arrays.mem_free[rows] - mem_p
    r, gn = g.shape
    if not wl.shapes:
        return np.zeros((r, gn))
    cpu, milli, num, mem, access, probs = wl.arrays_for(arrays)
    idle = g.sum(axis=1)
    big = g[:, None, :] >= milli[None, :, None]  # (R, S, G)
    count = big.sum(axis=2)  # (R, S)
    small = np.where(big, 0, g[:, None, :]).sum(axis=2)  # (R, S)
    v = g - milli_p  # (R, G) value of GPU i after the placement
    old_big = big.transpose(0, 2, 1)  # (R, G, S)
    new_big = v[:, :, None] >= milli[None, None, :]
    count_after = count[:, None, :] - old_big + new_big
    small_after = (
        small[:, None, :] - np.where(old_big, 0, g[:, :, None]) + np.where(new_big, 0, v[:, :, None])
    )
    base_fit = access[:, arrays.model_id[rows]].T & (c[:, None] >= cpu[None, :])  # (R, S)
    if wl.with_memory:
        base_fit &= mfree[:, None] >= mem[None, :]
    fits = base_fit[:, None, :] & (count_after >= num[None, None, :])
    idle_after = (idle - milli_p).astype(float)
    per_shape = np.where(fits, small_after, idle_after[:, None, None])
    return per_shape @ probs


def sigmoid_score(delta: np.ndarray) -> np.ndarray:
    """floor(100 * sigmoid(delta / 1000)): the FGD score of a fragment change (higher = less growth)."""
    x = np.clip(np.asarray(delta, dtype=float) / 1000.0, -60.0, 60.0)
    return np.floor(100.0 / (1.0 + np.exp(-x)))

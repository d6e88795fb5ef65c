"""FGD's node scores (Weng et al., USENIX ATC'23) over rows of ``ClusterArrays``, and the target workload M.

For a task p on node n: ``Delta = F_n(M) - F_{n'}(M)`` and ``score = floor(100 * sigmoid(Delta/1000))``
(the fragment measure F is ``scheduler.frag.fragmentation``). A shared task is tried on every fitting
GPU; the node's score is the best GPU's. Whole GPUs: the first k idle GPUs.

M comes from ``CycleState.data["target_workload"]`` (a ``TargetWorkload``; the benchmark builds it from
the trace as the paper does). Without one, M is built from what the cluster runs plus the pending
queue, i.e. the workload mix observed so far.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.fit import first_k, fitting_gpu_mask
from scheduler.frag.fragmentation import (
    TargetWorkload,
    fragment_after_whole,
    node_fragment,
    shared_fragment_after,
    sigmoid_score,
)
from scheduler.framework import CycleState
from scheduler.model import GPU_MILLI, TaskRequest


def observed_tasks(state: CycleState) -> list[TaskRequest]:
    """Task shapes the cluster has seen: running placements and the pending queue."""
    tasks: list[TaskRequest] = []
    for p in state.snapshot.running:
        whole = len(p.gpu_indices) > 1 or (p.gpu_indices and p.gpu_milli >= GPU_MILLI)
        tasks.append(
            TaskRequest(
                task_id=p.task_id,
                cpu_milli=p.cpu_milli,
                memory_mib=p.memory_mib,
                gpus=len(p.gpu_indices) if whole else 0,
                gpu_milli=0 if whole else p.gpu_milli,
            )
        )
    tasks.extend(state.data.get("pending_tasks", ()))
    return tasks


def target_workload(state: CycleState, with_memory: bool = False) -> TargetWorkload:
    wl = state.data.get("target_workload")
    if isinstance(wl, TargetWorkload):
        return wl
    key = "_observed_workload_mem" if with_memory else "_observed_workload"
    cached = state.data.get(key)
    if not isinstance(cached, TargetWorkload):
        cached = TargetWorkload.from_tasks(observed_tasks(state), with_memory=with_memory)
        state.data[key] = cached
    return cached


def fgd_scores(
    state: CycleState,
    task: TaskRequest,
    rows: np.ndarray,
    wl: TargetWorkload,
    shared_score: Callable[[np.ndarray], np.ndarray] = sigmoid_score,
) -> tuple[np.ndarray, np.ndarray]:
    """(score per row, best GPU slot per row or -1). Rows where the task fits on no GPU score -1.

    ``shared_score`` maps a shared task's fragment change per GPU to its score (FGD floors it).
    """
    arrays: ClusterArrays = state.arrays
    before = node_fragment(wl, arrays, rows)
    if task.is_shared:
        valid = fitting_gpu_mask(arrays, task, rows)
        after = shared_fragment_after(wl, arrays, rows, task.gpu_milli, task.cpu_milli, task.memory_mib)
        per_gpu = np.where(valid, shared_score(before[:, None] - after), -1.0)
        best = np.argmax(per_gpu, axis=1)
        return per_gpu[np.arange(len(rows)), best], np.where(valid.any(axis=1), best, -1)
    if task.gpus:
        # The first k idle GPUs; ``taken`` counts them per row (k on every feasible row).
        taken = first_k(fitting_gpu_mask(arrays, task, rows), task.gpus).sum(axis=1)
    else:
        taken = np.zeros(len(rows), dtype=np.int64)
    after = fragment_after_whole(wl, arrays, rows, taken, task.cpu_milli, task.memory_mib)
    return sigmoid_score(before - after), np.full(len(rows), -1)

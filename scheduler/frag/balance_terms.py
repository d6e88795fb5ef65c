"""The seed strategy's balance terms per row: imbalance after placement and the similarity of the
request to the node's usage (formulas in ``scheduler.plugins.balance``)."""

from __future__ import annotations

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.model import GPU_MILLI, TaskRequest


def balance_terms(
    arrays: ClusterArrays, task: TaskRequest, rows: np.ndarray, similarity: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """(imbalance after placement, cosine similarity of request and current usage) per row; the
    similarity is zeros when not asked for (``balance_yield`` uses only the imbalance)."""
    cpu_cap = np.maximum(arrays.cpu_cap[rows], 1).astype(float)
    mem_cap = np.maximum(arrays.mem_cap[rows], 1).astype(float)
    gpu_cap = np.maximum(arrays.gpu_count[rows] * GPU_MILLI, 1).astype(float)
    has_gpu = arrays.gpu_count[rows] > 0
    gpu_used = np.where(arrays.gpu_exists[rows], GPU_MILLI - arrays.gpu_free[rows], 0).sum(axis=1)
    used = np.stack(
        [
            (arrays.cpu_cap[rows] - arrays.cpu_free[rows]) / cpu_cap,
            (arrays.mem_cap[rows] - arrays.mem_free[rows]) / mem_cap,
            np.where(has_gpu, gpu_used / gpu_cap, 0.0),
        ]
    )
    req = np.stack(
        [
            task.cpu_milli / cpu_cap,
            task.memory_mib / mem_cap,
            np.where(has_gpu, task.total_gpu_milli / gpu_cap, 0.0),
        ]
    )
    after = used + req
    imbalance = np.where(has_gpu, after.std(axis=0), after[:2].std(axis=0))
    if not similarity:
        return imbalance, np.zeros(len(rows))
    norms = np.linalg.norm(used, axis=0) * np.linalg.norm(req, axis=0)
    cosine = np.divide((used * req).sum(axis=0), norms, out=np.zeros(len(rows)), where=norms > 0)
    return imbalance, cosine

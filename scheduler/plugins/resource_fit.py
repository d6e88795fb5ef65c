"""Filter: the node has the CPU, memory, GPU count, milli-GPU, GPU memory and GPU model the task needs.

A whole-GPU task needs ``gpus`` idle GPUs (no milli-GPU and no GPU memory in use). A shared task needs
one GPU with ``free milli >= gpu_milli`` and ``free memory >= gpu_memory_mib``. ``filter`` (one node,
with a reason) and ``filter_rows`` (all nodes, NumPy) implement the same test; a property test holds
them equal.
"""

from __future__ import annotations

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.fit import fitting_gpu_mask, fitting_gpus
from scheduler.framework import CycleState, Status
from scheduler.model import Node, TaskRequest
from scheduler.plugin_registry import register


@register("resource_fit")
class ResourceFit:
    name = "resource_fit"
    cacheable = True

    def filter(self, state: CycleState, task: TaskRequest, node: Node) -> Status:
        if node.free_cpu_milli < task.cpu_milli:
            return Status.unschedulable("insufficient CPU")
        if node.free_memory_mib < task.memory_mib:
            return Status.unschedulable("insufficient memory")
        if not task.total_gpu_milli:
            return Status.success()
        if task.gpu_models and node.gpu_model not in task.gpu_models:
            return Status.unresolvable(f"GPU model is not one of {', '.join(task.gpu_models)}")
        needed = max(task.gpus, 1)
        if len(node.gpus) < needed:
            return Status.unresolvable(f"node has fewer than {needed} GPU(s)")
        if len(fitting_gpus(task, node)) < needed:
            if task.gpus:
                return Status.unschedulable(f"fewer than {task.gpus} free whole GPU(s)")
            return Status.unschedulable("no GPU with enough free milli-GPU and GPU memory")
        return Status.success()

    def filter_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        arrays: ClusterArrays = state.arrays
        ok = (arrays.cpu_free[rows] >= task.cpu_milli) & (arrays.mem_free[rows] >= task.memory_mib)
        if not task.total_gpu_milli:
            return ok
        if task.gpu_models:
            ok &= arrays.model_mask(task.gpu_models)[rows]
        needed = max(task.gpus, 1)
        return ok & (fitting_gpu_mask(arrays, task, rows).sum(axis=1) >= needed)

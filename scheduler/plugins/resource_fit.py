"""Filter: the node has the CPU, memory, GPU count, milli-GPU, GPU memory and GPU model the task needs."""

from __future__ import annotations

from scheduler.framework import CycleState, Status, register
from scheduler.model import Node, TaskRequest


def fitting_gpus(task: TaskRequest, node: Node) -> list[int]:
    """Indices of GPUs on ``node`` that can take (one GPU's share of) ``task``."""
    if task.gpu_models and node.gpu_model not in task.gpu_models:
        return []
    if task.gpus:
        return [g.index for g in node.gpus if g.is_idle]
    return [
        g.index
        for g in node.gpus
        if g.free_milli >= task.gpu_milli and g.free_memory_mib >= task.gpu_memory_mib
    ]


@register("resource_fit")
class ResourceFit:
    name = "resource_fit"

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

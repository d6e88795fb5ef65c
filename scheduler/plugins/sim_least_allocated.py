"""``sim_least_allocated`` (score, a baseline of the simulator): Kubernetes' default
NodeResourcesFit/LeastAllocated on GPUs, ``100 * free_milli / capacity_milli`` of the node: spreads."""

from __future__ import annotations

from scheduler.framework import CycleState
from scheduler.model import GPU_MILLI, Node, TaskRequest
from scheduler.plugin_registry import register


def _capacity(node: Node) -> int:
    return len(node.gpus) * GPU_MILLI or 1


@register("sim_least_allocated")
class LeastAllocated:
    name = "sim_least_allocated"

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        used = sum(g.used_milli for g in node.gpus)
        return 100.0 * (_capacity(node) - used) / _capacity(node)

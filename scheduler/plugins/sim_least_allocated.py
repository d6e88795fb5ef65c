"""``sim_least_allocated`` (score, a baseline of the simulator): Kubernetes' default
NodeResourcesFit/LeastAllocated on GPUs, ``100 * free_milli / capacity_milli`` of the node: spreads."""

from __future__ import annotations

from scheduler.framework import CycleState
from scheduler.model import Node, TaskRequest
from scheduler.plugin_registry import register
from scheduler.plugins.sim_most_allocated import gpu_use


@register("sim_least_allocated")
class LeastAllocated:
    name = "sim_least_allocated"

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        used, capacity = gpu_use(node)
        return 100.0 * (capacity - used) / capacity

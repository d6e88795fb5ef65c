"""``sim_most_allocated`` (score, a baseline of the simulator): ``100 * used_milli / capacity_milli``
of the node: packs (consolidation, as Tiresias and Gandiva place)."""

from __future__ import annotations

from scheduler.framework import CycleState
from scheduler.model import GPU_MILLI, Node, TaskRequest
from scheduler.plugin_registry import register


def gpu_use(node: Node) -> tuple[int, int]:
    """The node's used milli-GPU and its milli-GPU capacity (at least 1, so a GPU-less node divides)."""
    return sum(g.used_milli for g in node.gpus), len(node.gpus) * GPU_MILLI or 1


@register("sim_most_allocated")
class MostAllocated:
    name = "sim_most_allocated"

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        used, capacity = gpu_use(node)
        return 100.0 * used / capacity

"""``sim_most_allocated`` (score, a baseline of the simulator): ``100 * used_milli / capacity_milli``
of the node: packs (consolidation, as Tiresias and Gandiva place)."""

from __future__ import annotations

from scheduler.framework import CycleState
from scheduler.model import GPU_MILLI, Node, TaskRequest
from scheduler.plugin_registry import register


def _capacity(node: Node) -> int:
    return len(node.gpus) * GPU_MILLI or 1


@register("sim_most_allocated")
class MostAllocated:
    name = "sim_most_allocated"

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        used = sum(g.used_milli for g in node.gpus)
        return 100.0 * used / _capacity(node)

"""GPU chooser: the lowest-indexed GPUs that fit (the foundation's placement)."""

from __future__ import annotations

from scheduler.framework import CycleState, register
from scheduler.model import Node, TaskRequest
from scheduler.plugins.resource_fit import fitting_gpus


@register("first_fit_gpus")
class FirstFitGpus:
    name = "first_fit_gpus"

    def choose_gpus(self, state: CycleState, task: TaskRequest, node: Node) -> tuple[int, ...] | None:
        candidates = fitting_gpus(task, node)
        needed = max(task.gpus, 1)
        if len(candidates) < needed:
            return None
        return tuple(candidates[:needed])

"""``sim_gpu_memory_binpack`` (score + GPU chooser, a baseline of the simulator): Alibaba gpushare's
binpack by GPU memory: the node, then the GPU, whose free GPU memory left after placing is smallest wins."""

from __future__ import annotations

from scheduler.engine.fit import fitting_gpus
from scheduler.engine.row_adapters import SharedGpuNodeChooser
from scheduler.framework import CycleState
from scheduler.model import Node, TaskRequest
from scheduler.plugin_registry import register


@register("sim_gpu_memory_binpack")
class GpuMemoryBinpack(SharedGpuNodeChooser):
    name = "sim_gpu_memory_binpack"

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        if task.gpus or not node.gpus:
            return 100.0 * sum(g.used_memory_mib for g in node.gpus) / max(1, _mem(node))
        fits = fitting_gpus(task, node)
        if not fits:
            return 0.0
        left = min(node.gpus[i].free_memory_mib - task.gpu_memory_mib for i in fits)
        return 100.0 * (1.0 - left / max(1, node.gpus[fits[0]].memory_mib))

    def choose_shared(
        self, state: CycleState, task: TaskRequest, node: Node, fits: list[int]
    ) -> tuple[int, ...] | None:
        best = min(fits, key=lambda i: (node.gpus[i].free_memory_mib, i))
        return (best,)


def _mem(node: Node) -> int:
    return sum(g.memory_mib for g in node.gpus)

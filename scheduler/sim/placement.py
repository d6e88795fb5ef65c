"""Placement plugins of the simulator's baselines (registered as ``sim_*``; the platform never uses them).

- ``sim_least_allocated`` (score): Kubernetes' default NodeResourcesFit/LeastAllocated on GPUs,
  ``100 * free_milli / capacity_milli`` of the node: spreads.
- ``sim_most_allocated`` (score): ``100 * used_milli / capacity_milli``: packs (consolidation,
  as Tiresias and Gandiva place).
- ``sim_gpu_memory_binpack`` (score + GPU chooser): Alibaba gpushare's binpack by GPU memory:
  the node, then the GPU, whose free GPU memory left after placing is smallest wins.
- ``sim_gandiva_gpus`` (GPU chooser): an idle GPU first; when none, pack onto a GPU that already has
  one tenant, skipping tenants whose job type the job learnt to avoid (Gandiva's introspection).

Task ids made by the simulator end in ``#<job type index>`` so choosers can see a tenant's job type
without a side channel; ``JobRequest.hints["avoid_types"]`` lists job type indices (comma separated).
"""

from __future__ import annotations

from scheduler.framework import CycleState, register
from scheduler.model import GPU_MILLI, Node, TaskRequest
from scheduler.plugins.resource_fit import fitting_gpus


def _capacity(node: Node) -> int:
    return len(node.gpus) * GPU_MILLI or 1


def tenant_type(task_id: str) -> int:
    """Job type index encoded in a simulator task id (``job/t0#17`` -> 17); -1 if none."""
    _, sep, tail = task_id.rpartition("#")
    return int(tail) if sep and tail.isdigit() else -1


@register("sim_least_allocated")
class LeastAllocated:
    name = "sim_least_allocated"

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        used = sum(g.used_milli for g in node.gpus)
        return 100.0 * (_capacity(node) - used) / _capacity(node)


@register("sim_most_allocated")
class MostAllocated:
    name = "sim_most_allocated"

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        used = sum(g.used_milli for g in node.gpus)
        return 100.0 * used / _capacity(node)


@register("sim_gpu_memory_binpack")
class GpuMemoryBinpack:
    name = "sim_gpu_memory_binpack"

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        if task.gpus or not node.gpus:
            return 100.0 * sum(g.used_memory_mib for g in node.gpus) / max(1, _mem(node))
        fits = fitting_gpus(task, node)
        if not fits:
            return 0.0
        left = min(node.gpus[i].free_memory_mib - task.gpu_memory_mib for i in fits)
        return 100.0 * (1.0 - left / max(1, node.gpus[fits[0]].memory_mib))

    def choose_gpus(self, state: CycleState, task: TaskRequest, node: Node) -> tuple[int, ...] | None:
        fits = fitting_gpus(task, node)
        needed = max(task.gpus, 1)
        if len(fits) < needed:
            return None
        if task.gpus:
            return tuple(fits[:needed])
        best = min(fits, key=lambda i: (node.gpus[i].free_memory_mib, i))
        return (best,)


def _mem(node: Node) -> int:
    return sum(g.memory_mib for g in node.gpus)


@register("sim_gandiva_gpus")
class GandivaGpus:
    name = "sim_gandiva_gpus"

    def choose_gpus(self, state: CycleState, task: TaskRequest, node: Node) -> tuple[int, ...] | None:
        fits = fitting_gpus(task, node)
        needed = max(task.gpus, 1)
        if len(fits) < needed:
            return None
        if task.gpus:
            return tuple(fits[:needed])
        idle = [i for i in fits if node.gpus[i].is_idle]
        if idle:
            return (idle[0],)
        job = state.job
        avoid_raw = job.hints.get("avoid_types", "") if job is not None else ""
        avoid = {int(x) for x in avoid_raw.split(",") if x}
        for i in fits:
            if not any(tenant_type(t) in avoid for t in node.gpus[i].tenants):
                return (i,)
        return None

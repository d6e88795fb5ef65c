"""``sim_gandiva_gpus`` (GPU chooser, a baseline of the simulator): an idle GPU first; when none, pack
onto a GPU that already has one tenant, skipping tenants whose job type the job learnt to avoid
(Gandiva's introspection, ``JobRequest.hints["avoid_types"]``: job type indices, comma separated).

Task ids made by the simulator end in ``#<job type index>`` so the chooser sees a tenant's job type
without a side channel (``tenant_type``)."""

from __future__ import annotations

from scheduler.engine.row_adapters import SharedGpuNodeChooser
from scheduler.framework import CycleState
from scheduler.model import Node, TaskRequest
from scheduler.plugin_registry import register


def tenant_type(task_id: str) -> int:
    """Job type index encoded in a simulator task id (``job/t0#17`` -> 17); -1 if none."""
    _, sep, tail = task_id.rpartition("#")
    return int(tail) if sep and tail.isdigit() else -1


@register("sim_gandiva_gpus")
class GandivaGpus(SharedGpuNodeChooser):
    name = "sim_gandiva_gpus"

    def choose_shared(
        self, state: CycleState, task: TaskRequest, node: Node, fits: list[int]
    ) -> tuple[int, ...] | None:
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

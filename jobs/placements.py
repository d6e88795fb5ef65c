"""The one converter between a job's Task rows and the scheduler's ``Placement``.

The cycle writes a decided ``Placement`` into a Task row (``task_fields``); binding, the cycle's view of
pending binds and of running jobs read it back (``task_placement``). CPU and memory are per job, so
they come from the Job row.
"""

from __future__ import annotations

from typing import Any

from jobs.models import Job, Task
from scheduler.model import Placement


def task_placement(job: Job, task: Task) -> Placement:
    """The placement ``task`` (of ``job``) was given."""
    return Placement(
        job_id=str(job.pk),
        task_id=task.name,
        node=task.node,
        gpu_indices=tuple(task.gpu_indices),
        gpu_milli=task.gpu_milli,
        gpu_memory_mib=task.gpu_memory_mib,
        cpu_milli=job.cpu_milli,
        memory_mib=job.memory_mib,
        reason=task.placement_reason,
        predicted_slowdown=task.predicted_slowdown,
    )


def task_fields(placement: Placement) -> dict[str, Any]:
    """The Task row columns that record ``placement`` (the inverse of ``task_placement``)."""
    return {
        "node": placement.node,
        "gpu_indices": list(placement.gpu_indices),
        "gpu_milli": placement.gpu_milli,
        "gpu_memory_mib": placement.gpu_memory_mib,
        "placement_reason": placement.reason,
        "predicted_slowdown": placement.predicted_slowdown,
    }

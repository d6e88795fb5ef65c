"""``PROFILE_NEW_JOBS``: a job whose configuration has no solo profile starts alone on an idle GPU.

The interference model needs a job's solo profile (``SoloProfile``), which is measured while the job
runs alone (the node agent's samples, ``jobs.agent_api``). With ``PROFILE_NEW_JOBS = N`` (minutes,
0 = off), the cycle gives such a job its first N minutes alone on an idle GPU when one is free:

* **Placement** (``solo_first_queue``): a waiting shared job (``gpu_milli`` < 1000) whose image and
  command were never profiled is offered to the policy as asking for whole GPUs, one per replica,
  while the snapshot has that many idle GPUs left (in submission order): the policy can then only
  give it idle GPUs. When too few are idle the job is offered as it is and may be packed: it never
  waits for a GPU of its own. ``own_share`` turns the whole-GPU placement back into the job's own
  share on the GPU chosen, so the Task, the quota and the backend see what the job asked for, and
  the placement reason says why it is alone.
* **The window** (``hold_profiling_gpus``): while such a task is in its first N minutes (from its
  start; a task not started yet counts as in its window) and its configuration still has no solo
  profile, the rest of its GPU is shown to the policy as taken, so nothing is packed beside it.
  Once the profile exists or the window ends, the GPU is an ordinary shared GPU again.

What it costs (docs/interference.md): per new configuration, at most N minutes of the GPU share
the job leaves unused (``1 - gpu_milli / 1000`` of a GPU), once, since the next run of that
configuration has a profile; and, while a whole-GPU offer holds idle GPUs, other jobs of the same
cycle may not get them. A job is placed no later than without the rule: it is offered alone only
when idle GPUs exist.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence

from django.conf import settings
from django.db.models import Q

from jobs.models import Job, SoloProfile, Task
from jobs.profiling_services import job_configuration
from jobs.states import JobStatus
from scheduler.model import GPU_MILLI, ClusterSnapshot, JobRequest, Placement

# In the placement reason of a task placed alone for profiling: how the window finds its tasks.
MARK = "alone for profiling"
_LIVE = (JobStatus.ADMITTED.value, JobStatus.STARTING.value, JobStatus.RUNNING.value)


def window_s() -> float:
    """The profiling window in seconds (``PROFILE_NEW_JOBS`` minutes; 0 = the rule is off)."""
    return max(0.0, float(getattr(settings, "PROFILE_NEW_JOBS", 0.0))) * 60.0


def _idle_gpus(snapshot: ClusterSnapshot) -> int:
    return sum(
        1
        for node in snapshot.nodes
        if node.schedulable
        for gpu in node.gpus
        if gpu.used_milli == 0 and not gpu.tenants
    )


def solo_first_queue(
    queue: Sequence[JobRequest], unprofiled: Iterable[str], snapshot: ClusterSnapshot
) -> list[JobRequest]:
    """``queue`` with the unprofiled shared jobs asking for idle whole GPUs while enough are idle."""
    if window_s() <= 0:
        return list(queue)
    wanted = set(unprofiled)
    left = _idle_gpus(snapshot)
    out: list[JobRequest] = []
    for request in sorted(queue, key=lambda r: (r.submitted_at, r.job_id)):
        shared = request.tasks and all(t.is_shared for t in request.tasks)
        if request.job_id in wanted and shared and len(request.tasks) <= left:
            left -= len(request.tasks)
            whole = [dataclasses.replace(t, gpus=1, gpu_milli=0) for t in request.tasks]
            request = dataclasses.replace(request, tasks=whole, hints={**request.hints, "solo_first": "1"})
        out.append(request)
    return out


def own_share(job: Job, placements: list[Placement]) -> list[Placement]:
    """The job's own share on the GPUs a whole-GPU offer (``solo_first_queue``) got; other
    placements unchanged."""
    shared = not job.gpus and 0 < job.gpu_milli < GPU_MILLI
    if not shared or not all(p.gpu_milli >= GPU_MILLI and len(p.gpu_indices) == 1 for p in placements):
        return placements
    minutes = window_s() / 60.0
    why = f"{MARK}: its first {minutes:g} min on an idle GPU (PROFILE_NEW_JOBS; no solo profile yet)"
    return [
        dataclasses.replace(
            p,
            gpu_milli=job.gpu_milli,
            gpu_memory_mib=job.gpu_memory_mib,
            reason=f"{p.reason}; {why}" if p.reason else why,
        )
        for p in placements
    ]


def hold_profiling_gpus(snapshot: ClusterSnapshot, now: float) -> list[tuple[str, int]]:
    """Show the GPUs of tasks in their profiling window as full (module docstring); returns them."""
    window = window_s()
    if window <= 0:
        return []
    since = dt.datetime.fromtimestamp(now - window, tz=dt.UTC)
    tasks = list(
        Task.objects.filter(
            job__status__in=_LIVE,
            gpu_milli__gt=0,
            gpu_milli__lt=GPU_MILLI,
            placement_reason__contains=MARK,
        )
        .filter(Q(started_at__isnull=True) | Q(started_at__gt=since))
        .select_related("job__image")
    )
    if not tasks:
        return []
    keys = {t.job_id: job_configuration(t.job) for t in tasks}
    profiled = set(
        SoloProfile.objects.filter(
            image__in={k[0] for k in keys.values()}, command_hash__in={k[1] for k in keys.values()}
        ).values_list("image", "command_hash")
    )
    nodes = {n.name: n for n in snapshot.nodes}
    held: list[tuple[str, int]] = []
    for task in tasks:
        node = nodes.get(task.node)
        if node is None or keys[task.job_id] in profiled or len(task.gpu_indices) != 1:
            continue
        index = int(task.gpu_indices[0])
        if not 0 <= index < len(node.gpus):
            continue
        gpu = node.gpus[index]
        gpu.used_milli = GPU_MILLI
        gpu.used_memory_mib = max(gpu.used_memory_mib, gpu.memory_mib)
        held.append((node.name, index))
    return held

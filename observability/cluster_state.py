"""What the cluster holds right now, from the backend's snapshot and the job table: the numbers that
the metrics collector exposes at scrape time and the history sampler stores every minute.

One definition for both, so a Grafana panel and the portal's history chart never disagree.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from jobs.states import JobStatus
from scheduler.model import GPU_MILLI, ClusterSnapshot

# Jobs holding (or about to hold) GPUs, and jobs not placed yet: the dashboard's "running"/"waiting".
RUNNING_STATUSES = (
    JobStatus.ADMITTED,
    JobStatus.STARTING,
    JobStatus.RUNNING,
    JobStatus.PREEMPTING,
    JobStatus.STOPPING,
)
WAITING_STATUSES = (JobStatus.SUBMITTED, JobStatus.QUEUED, JobStatus.REQUEUED)


@dataclass(frozen=True)
class GpuGroup:
    """The GPUs of one node and model, in milli-GPU."""

    node: str
    gpu_model: str
    gpus: int
    capacity_milli: int
    allocated_milli: int
    # Free milli-GPU on GPUs that are partly used: capacity a whole-GPU job cannot take.
    stranded_milli: int

    @property
    def idle_milli(self) -> int:
        return self.capacity_milli - self.allocated_milli


@dataclass
class TeamState:
    allocated_milli: int = 0
    running: int = 0
    waiting: int = 0


@dataclass
class ClusterState:
    groups: list[GpuGroup]
    by_team: dict[str, TeamState] = field(default_factory=dict)

    @property
    def capacity_milli(self) -> int:
        return sum(g.capacity_milli for g in self.groups)

    @property
    def allocated_milli(self) -> int:
        return sum(g.allocated_milli for g in self.groups)

    @property
    def fragmentation(self) -> float:
        return fragmentation(self.groups)

    @property
    def running(self) -> int:
        return sum(t.running for t in self.by_team.values())

    @property
    def waiting(self) -> int:
        return sum(t.waiting for t in self.by_team.values())


def fragmentation(groups: list[GpuGroup]) -> float:
    """Share of the free capacity that is stranded on partly used GPUs:
    ``sum(free milli on GPUs with 0 < used < 1000) / sum(free milli)``; 0 when nothing is free."""
    free = sum(g.idle_milli for g in groups)
    return sum(g.stranded_milli for g in groups) / free if free > 0 else 0.0


def gpu_groups(snapshot: ClusterSnapshot) -> list[GpuGroup]:
    """Capacity, allocation and stranded capacity per (node, GPU model) of ``snapshot``."""
    acc: dict[tuple[str, str], list[int]] = {}
    for node in snapshot.nodes:
        for gpu in node.gpus:
            used = min(GPU_MILLI, max(0, gpu.used_milli))
            row = acc.setdefault((node.name, gpu.model or "unknown"), [0, 0, 0, 0])
            row[0] += 1
            row[1] += GPU_MILLI
            row[2] += used
            row[3] += GPU_MILLI - used if 0 < used < GPU_MILLI else 0
    return [
        GpuGroup(
            node=n, gpu_model=m, gpus=r[0], capacity_milli=r[1], allocated_milli=r[2], stranded_milli=r[3]
        )
        for (n, m), r in sorted(acc.items())
    ]


def team_allocations(snapshot: ClusterSnapshot) -> dict[str, int]:
    """Milli-GPU held on the cluster per team slug (placements of platform jobs only)."""
    from jobs.models import Job

    per_job: dict[int, int] = defaultdict(int)
    for p in snapshot.running:
        if str(p.job_id).isdigit():
            per_job[int(p.job_id)] += p.gpu_milli * len(p.gpu_indices)
    teams = dict(Job.objects.filter(pk__in=list(per_job)).values_list("pk", "team__slug"))
    out: dict[str, int] = defaultdict(int)
    for job_id, milli in per_job.items():
        if job_id in teams:
            out[teams[job_id]] += milli
    return dict(out)


def job_counts_by_team() -> dict[str, TeamState]:
    """Running and waiting jobs per team slug, from the job table."""
    from django.db.models import Count

    from jobs.models import Job

    running = {s.value for s in RUNNING_STATUSES}
    rows = (
        Job.objects.filter(status__in=[*running, *(s.value for s in WAITING_STATUSES)])
        .order_by()
        .values("team__slug", "status")
        .annotate(n=Count("id"))
    )
    out: dict[str, TeamState] = defaultdict(TeamState)
    for row in rows:
        state = out[row["team__slug"]]
        if row["status"] in running:
            state.running += row["n"]
        else:
            state.waiting += row["n"]
    return dict(out)


def cluster_state(snapshot: ClusterSnapshot) -> ClusterState:
    """The cluster now: GPU groups from ``snapshot``, jobs per team from the database."""
    by_team = job_counts_by_team()
    for slug, milli in team_allocations(snapshot).items():
        by_team.setdefault(slug, TeamState()).allocated_milli = milli
    return ClusterState(groups=gpu_groups(snapshot), by_team=dict(sorted(by_team.items())))

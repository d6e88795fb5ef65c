"""Declarative scenarios for ``plan_cycle``: a cluster, the running jobs and the queue, built into a
``PolicyView``; and the invariants every scenario's Decision must keep."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.model import (
    ClusterSnapshot,
    Decision,
    Gpu,
    JobRequest,
    Node,
    Placement,
    TaskRequest,
    reserve,
    unreserve,
)
from scheduler.policy import PolicyView, RunningJob

GPU_MEMORY_MIB = 16384
PROFILE = {"model_family": "ResNet-18", "job_type": "ResNet-18 (batch size 64)", "batch_size": 64.0,
           "gpu_memory_mib": 2000.0, "solo_throughput": 100.0}  # fmt: skip


@dataclass
class Job:
    """A job of the scenario: ``gpus`` whole GPUs per task (``tasks`` tasks), or a shared 1-GPU job
    (``milli`` < 1000). Running jobs give ``on``: one ``(node, GPU indices)`` per task."""

    id: str
    gpus: int = 1
    tasks: int = 1
    milli: int = 0
    priority: int = 0
    attained_h: float = 0.0  # GPU-hours over earlier runs
    submitted: float = 0.0
    preemptible: bool = True
    min_runtime_s: float = 0.0
    allow_sharing: bool = False
    tolerance: float = 1.5
    on: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    started: float = 0.0
    rate: float | None = None

    def request(self) -> JobRequest:
        tasks = [
            TaskRequest(
                task_id=f"{self.id}-{k}",
                cpu_milli=1000,
                memory_mib=1024,
                gpus=0 if self.milli else self.gpus,
                gpu_milli=self.milli,
                gpu_memory_mib=2512 if self.milli else 0,
            )
            for k in range(self.tasks)
        ]
        return JobRequest(
            job_id=self.id,
            tasks=tasks,
            priority=self.priority,
            submitted_at=self.submitted,
            slowdown_tolerance=self.tolerance,
            profile=dict(PROFILE),
            attained_gpu_s=self.attained_h * 3600.0,
            preemptible=self.preemptible,
            min_runtime_s=self.min_runtime_s,
            allow_sharing=self.allow_sharing,
        )


def view(nodes: dict[str, int], running: list[Job], queue: list[Job], now: float = 10_000.0) -> PolicyView:
    snap = ClusterSnapshot(
        nodes=[
            Node(
                name=n,
                cpu_milli=64_000,
                memory_mib=512 * 1024,
                gpus=[Gpu(index=i, model="V100", memory_mib=GPU_MEMORY_MIB) for i in range(g)],
            )
            for n, g in nodes.items()
        ],  # fmt: skip
        now=now,
    )
    by_name = {n.name: n for n in snap.nodes}
    out: list[RunningJob] = []
    for job in running:
        req = job.request()
        placements = []
        for task, (node, gpus) in zip(req.tasks, job.on, strict=True):
            milli = job.milli or 1000
            p = Placement(
                job_id=job.id,
                task_id=task.task_id,
                node=node,
                gpu_indices=gpus,
                gpu_milli=milli,
                gpu_memory_mib=task.gpu_memory_mib or GPU_MEMORY_MIB,
                cpu_milli=task.cpu_milli,
                memory_mib=task.memory_mib,
            )
            reserve(by_name[node], p)
            snap.running.append(p)
            snap.task_profiles[task.task_id] = {**PROFILE, "slowdown_tolerance": job.tolerance}
            placements.append(p)
        out.append(RunningJob(request=req, placements=placements, started_at=job.started, rate=job.rate))
    return PolicyView(snapshot=snap, queue=[j.request() for j in queue], running=out, now=now)


def gpus_of(placements: list[Placement] | tuple[Placement, ...]) -> set[tuple[str, int]]:
    return {(p.node, g) for p in placements for g in p.gpu_indices}


def check_invariants(v: PolicyView, decision: Decision) -> None:
    """No GPU oversubscribed once evictions and migrations free their GPUs and the placements (and
    the migrations' targets) are added; every eviction names a rule and a preemptor; a preemptor is
    placed only on GPUs that were idle or that its victims (or other evicted jobs) freed; nothing
    the view protects is evicted or moved; a victim is not placed again in the same cycle."""
    snap = v.snapshot.copy()
    nodes = {n.name: n for n in snap.nodes}
    running = {r.job_id: r for r in v.running}
    gone = [e.job_id for e in decision.evictions] + [m.job_id for m in decision.migrations]
    assert len(gone) == len(set(gone)), f"a job evicted twice: {gone}"
    held_before = {k for r in v.running for k in gpus_of(r.placements)}
    freed: set[tuple[str, int]] = set()
    for job_id in gone:
        r = running[job_id]
        assert r.request.preemptible, f"{job_id} may not be preempted"
        assert v.now - r.started_at >= r.request.min_runtime_s, (
            f"{job_id} is younger than its minimum run time"
        )
        for p in r.placements:  # the whole job, every task (a gang goes whole)
            unreserve(nodes[p.node], p)
        freed |= gpus_of(r.placements)
    still_held = {k for r in v.running if r.job_id not in gone for k in gpus_of(r.placements)}
    for e in decision.evictions:
        assert e.rule and e.preemptor and e.reason, e
    placed = {p.job_id for p in decision.placements}
    assert not placed & set(gone), "a victim placed again in the cycle that evicts it"
    targets = [p for m in decision.migrations for p in m.to]
    for p in [*decision.placements, *targets]:
        reserve(nodes[p.node], p)
    for node in snap.nodes:
        for g in node.gpus:
            assert g.used_milli <= 1000, f"{node.name} GPU {g.index} oversubscribed: {g.used_milli}"
            assert g.used_memory_mib <= g.memory_mib, f"{node.name} GPU {g.index} memory oversubscribed"
    preemptors = {e.preemptor for e in decision.evictions if e.preemptor != e.job_id}
    for job_id in preemptors & placed:
        mine = gpus_of(decision.placements_for(job_id))
        whole = {k for p in decision.placements_for(job_id) if p.gpu_milli >= 1000 for k in gpus_of([p])}
        assert not whole & still_held, f"preemptor {job_id} placed on GPUs that no victim frees"
        assert mine <= (freed | (mine - held_before)), f"preemptor {job_id} not on what was freed or idle"

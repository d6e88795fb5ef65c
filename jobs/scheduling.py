"""The scheduling cycle: queued jobs -> scheduler decision -> ADMITTED jobs with placed tasks.

One cycle (``run_scheduling_cycle``):

1. takes a single-flight lock (``cache.add`` with a timeout, atomic on Redis; if another cycle holds
   it, this call only leaves a "run again" mark that the holder honours before letting go);
2. builds a ``ClusterSnapshot`` from the backend and adds the placements of ADMITTED jobs whose
   tasks the backend does not know yet (decided, bind pending), so they are never given away twice;
3. orders the QUEUED jobs: priority (high first), then fair share (the team's GPU share in use,
   relative to its guarantee, low first), then age (old first);
4. calls ``scheduler.schedule(snapshot, pending, profile)``;
5. applies the decision's evictions (preempted jobs go RUNNING -> REQUEUED -> QUEUED), then
   persists: each placed job moves QUEUED -> ADMITTED with its Task rows (``job-<id>-<index>``) and a
   bind is enqueued on commit; each unplaced job keeps QUEUED with ``pending_reason`` saying its queue
   position and why it did not fit.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from jobs import dispatch
from jobs.cluster import get_backend
from jobs.models import Job, Task, TaskPhase
from jobs.profiling_services import fill_running_task_profiles, solo_profiles_for_jobs
from jobs.services import job_transition
from jobs.states import HOLDS_PLACEMENT, JobStatus
from quotas.models import Quota
from scheduler import framework, profiles
from scheduler.backends.base import ClusterBackend
from scheduler.model import ClusterSnapshot, JobRequest, Placement, TaskRequest

logger = logging.getLogger(__name__)

LOCK_KEY = "jobs:scheduling-cycle:lock"
RERUN_KEY = "jobs:scheduling-cycle:rerun"
# Longer than any sane cycle; if a worker dies holding the lock, the next cycle runs after this.
LOCK_TIMEOUT_S = 120
MAX_RERUNS = 3
ACTOR = "scheduler"


@dataclass
class CycleResult:
    admitted: list[int] = field(default_factory=list)
    pending: dict[int, str] = field(default_factory=dict)
    evicted: list[int] = field(default_factory=list)


def task_name(job_id: int, index: int) -> str:
    """Deterministic task name: a repeated bind finds the same task (idempotence)."""
    return f"job-{job_id}-{index}"


def job_request(job: Job, profile: dict[str, float | str] | None = None) -> JobRequest:
    """The scheduler's view of a job: one TaskRequest per replica, a gang.

    ``profile``: the job's measured solo profile (``jobs.profiling_services``), {} when unknown.
    """
    shared = not job.gpus and bool(job.gpu_milli)
    tasks = [
        TaskRequest(
            task_id=task_name(job.pk, i),
            cpu_milli=job.cpu_milli,
            memory_mib=job.memory_mib,
            gpus=job.gpus,
            gpu_milli=job.gpu_milli if shared else 0,
            gpu_memory_mib=job.gpu_memory_mib,
            gpu_models=tuple(job.gpu_models or ()),
        )
        for i in range(job.replicas)
    ]
    hints = {str(k): str(v) for k, v in (job.env or {}).items() if str(k).startswith("SCHED_")}
    if job.image.min_driver:
        hints["min_driver"] = job.image.min_driver
    return JobRequest(
        job_id=str(job.pk),
        tasks=tasks,
        priority=job.priority,
        submitted_at=(job.submitted_at or job.created_at).timestamp(),
        team=job.team.slug,
        user=job.user.username,
        slowdown_tolerance=job.slowdown_tolerance,
        profile=dict(profile or {}),
        hints=hints,
    )


def team_shares() -> dict[int, float]:
    """Each team's GPU use in placement-holding states, relative to its guarantee (fair share key)."""
    used: dict[int, int] = defaultdict(int)
    for job in Job.objects.filter(status__in=[s.value for s in HOLDS_PLACEMENT]).only(
        "team_id", "gpus", "gpu_milli", "replicas"
    ):
        used[job.team_id] += job.total_gpu_milli
    guarantees = dict(Quota.objects.values_list("team_id", "guaranteed_gpu_milli"))
    # Without a guarantee, a team's raw use (in GPUs) is its share; with one, use / guarantee.
    return {team: milli / (guarantees.get(team) or 1000) for team, milli in used.items()}


def order_queue(jobs: list[Job]) -> list[Job]:
    """Priority (high first), then fair share (least-served team first), then age (oldest first)."""
    shares = team_shares()
    return sorted(
        jobs,
        key=lambda j: (-j.priority, shares.get(j.team_id, 0.0), j.submitted_at or j.created_at, j.pk),
    )


def _add_pending_binds(snapshot: ClusterSnapshot) -> None:
    """Reserve placements decided in earlier cycles whose tasks the backend does not show yet."""
    known = {p.task_id for p in snapshot.running}
    nodes = {n.name: n for n in snapshot.nodes}
    # Only ADMITTED: a job becomes STARTING after all its tasks are bound, so the backend shows them.
    tasks = Task.objects.filter(job__status=JobStatus.ADMITTED.value).select_related("job")
    for task in tasks:
        node = nodes.get(task.node)
        if task.name in known or node is None:
            continue
        if any(i >= len(node.gpus) for i in task.gpu_indices):
            continue
        placement = Placement(
            job_id=str(task.job_id),
            task_id=task.name,
            node=task.node,
            gpu_indices=tuple(task.gpu_indices),
            gpu_milli=task.gpu_milli,
            gpu_memory_mib=task.gpu_memory_mib,
            cpu_milli=task.job.cpu_milli,
            memory_mib=task.job.memory_mib,
        )
        framework.reserve(node, placement)
        snapshot.running.append(placement)


def _persist_placement(job: Job, placements: list[Placement]) -> bool:
    """QUEUED -> ADMITTED with Task rows, atomically; False if the job left QUEUED meanwhile."""
    placements = sorted(placements, key=lambda p: int(p.task_id.rsplit("-", 1)[1]))
    where = ", ".join(f"{p.node} GPU {list(p.gpu_indices)}" for p in placements)
    first_reason = placements[0].reason if placements else ""
    with transaction.atomic():
        moved = job_transition(
            job=job,
            to=JobStatus.ADMITTED,
            actor=ACTOR,
            reason=f"placed on {where}" + (f" ({first_reason})" if first_reason else ""),
            expected_from=JobStatus.QUEUED,
        )
        if not moved:
            return False
        for index, p in enumerate(placements):
            Task.objects.update_or_create(
                job=job,
                index=index,
                defaults={
                    "name": task_name(job.pk, index),
                    "node": p.node,
                    "gpu_indices": list(p.gpu_indices),
                    "gpu_milli": p.gpu_milli,
                    "gpu_memory_mib": p.gpu_memory_mib,
                    "phase": TaskPhase.PENDING,
                    "exit_code": None,
                    "message": "",
                    "placement_reason": p.reason,
                    "predicted_slowdown": p.predicted_slowdown,
                    "started_at": None,
                    "finished_at": None,
                },
            )
        dispatch.request_bind(job.pk)
    return True


def _apply_evictions(backend: ClusterBackend, task_names: list[str]) -> list[int]:
    """Preempt the jobs of evicted tasks: delete them on the backend, RUNNING -> REQUEUED -> QUEUED.

    A gang is evicted whole (one evicted task stops its job). Runs before the decision's placements
    are persisted, so the freed GPUs are free by the time the preemptor's bind runs.
    """
    if not task_names:
        return []
    job_ids = set(Task.objects.filter(name__in=task_names).values_list("job_id", flat=True))
    evicted = []
    live = [JobStatus.STARTING.value, JobStatus.RUNNING.value]
    for job in Job.objects.filter(pk__in=job_ids, status__in=live):
        source = JobStatus(job.status)
        backend.delete_job(str(job.pk))
        with transaction.atomic():
            if job_transition(
                job=job,
                to=JobStatus.REQUEUED,
                actor=ACTOR,
                reason="preempted by higher-priority work",
                expected_from=source,
            ):
                job_transition(
                    job=job,
                    to=JobStatus.QUEUED,
                    actor=ACTOR,
                    reason="requeued after preemption",
                    expected_from=JobStatus.REQUEUED,
                )
                evicted.append(job.pk)
    return evicted


def _cycle_once(backend: ClusterBackend) -> CycleResult:
    result = CycleResult()
    queued = list(Job.objects.filter(status=JobStatus.QUEUED.value).select_related("team", "user", "image"))
    if not queued:
        return result
    snapshot = backend.snapshot()
    _add_pending_binds(snapshot)
    ordered = order_queue(queued)
    profile = profiles.get_profile(settings.SCHEDULER_PROFILE)
    # Solo profiles measured for the same image + command (issue 4) feed interference prediction:
    # the queued jobs' go into JobRequest.profile, the running tasks' into snapshot.task_profiles.
    # Jobs never profiled get {} and interference-aware plugins fall back to their declared share.
    solo = solo_profiles_for_jobs(ordered)
    fill_running_task_profiles(snapshot)
    decision = framework.schedule(snapshot, [job_request(j, solo.get(j.pk)) for j in ordered], profile)
    result.evicted = _apply_evictions(backend, decision.evictions)
    position = 0
    for job in ordered:
        placements = decision.placements_for(str(job.pk))
        if placements and len(placements) == job.replicas:
            if _persist_placement(job, placements):
                result.admitted.append(job.pk)
            continue
        position += 1
        why = decision.unschedulable.get(str(job.pk), "waiting for resources")
        reason = f"#{position} in queue: {why}"[:500]
        Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED.value).exclude(pending_reason=reason).update(
            pending_reason=reason
        )
        result.pending[job.pk] = reason
    return result


def run_scheduling_cycle(*, backend: ClusterBackend | None = None) -> CycleResult | None:
    """Run one cycle under the single-flight lock. Returns None when another cycle held the lock.

    Triggers that arrive while a cycle runs are not lost: they set a mark and the running cycle goes
    round again (at most MAX_RERUNS times; beat covers the rest).
    """
    token = uuid.uuid4().hex
    if not cache.add(LOCK_KEY, token, timeout=LOCK_TIMEOUT_S):
        cache.set(RERUN_KEY, 1, timeout=LOCK_TIMEOUT_S)
        return None
    try:
        backend = backend or get_backend()
        total = CycleResult()
        for _ in range(1 + MAX_RERUNS):
            cache.delete(RERUN_KEY)
            result = _cycle_once(backend)
            total.admitted += result.admitted
            total.evicted += result.evicted
            total.pending = result.pending
            if not cache.get(RERUN_KEY):
                break
        if total.admitted:
            logger.info("scheduling cycle admitted jobs %s", total.admitted)
        return total
    finally:
        # Only release our own lock (it may have expired and been taken by another cycle).
        if cache.get(LOCK_KEY) == token:
            cache.delete(LOCK_KEY)

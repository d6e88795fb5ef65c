"""The scheduling cycle: queued jobs -> scheduler decision -> ADMITTED jobs with placed tasks.

One cycle (``run_scheduling_cycle``):

1. takes the scheduling lease (``jobs.lease``: short, renewed, owner token, compare-and-delete; if
   another cycle holds it, this call only leaves a "run again" mark that the holder honours before
   letting go); the persist step is fenced (``lease.check()``): a cycle that lost its lease binds
   nothing;
2. builds the policy's view (``build_view``): the backend's snapshot plus the placements of ADMITTED
   jobs whose tasks the backend does not show yet (decided, bind pending, never given away twice);
   the QUEUED jobs as ``JobRequest`` with their attained service from the run ledger
   (``quotas.RunUsage``); the RUNNING/STARTING jobs as ``RunningJob`` (current run's start,
   placements); the completed jobs' service history (Gittins index); ``now`` from ``clock()``;
3. places migrated jobs that are QUEUED again on their planned target first, while it still fits;
4. calls ``scheduler.policy.plan_cycle(view, get_policy(settings.SCHEDULER_POLICY))``, the call the
   simulator makes;
5. applies the decision: evictions and migrations move RUNNING -> PREEMPTING (an event naming the
   rule and the preemptor; ``backend.preempt_job(id, grace)`` sends SIGTERM; ``preemptions`` + 1, a
   migration also ``migrations`` + 1 and its target kept in ``planned_placement``); each placed job
   moves QUEUED -> ADMITTED with its Task rows (``job-<id>-<index>``) and a bind enqueued on commit,
   unless its placement uses GPUs that a job being preempted still holds; every waiting job gets
   ``pending_reason`` ("#N in queue (<order rule>): <why>") and ``queue_position``.

Preemption is asynchronous: the victim keeps its GPUs through its grace period, and ``jobs.sync``
moves it PREEMPTING -> REQUEUED -> QUEUED once the backend reports its tasks stopped. Meanwhile its
preemptor waits QUEUED ("waiting for preempted job X to stop"), first in the queue and left out of the
policy's queue (else each cycle of the grace would choose more victims for it); the cycle after the
victims stopped offers it again and the policy places it on what they freed. A migration is therefore
placed on its target by the first cycle that finds it QUEUED again, not by the cycle that decided it
(its old GPUs are not free before the grace ends); if the target is taken by then, the policy places
it afresh. Rounds (the policy's periodic rules) run once per ``ROUND_S`` of the clock, like the
simulator's.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Case, F, Value, When

from jobs import dispatch, heartbeat, lease
from jobs.cluster import get_backend
from jobs.colocation import measured_rates
from jobs.faults import fault_point
from jobs.models import Job, JobEvent, Task, TaskPhase
from jobs.placements import task_fields, task_placement
from jobs.policy_settings import ROUND_S, active_policy, queue_order_key
from jobs.profiling_services import fill_running_task_profiles, solo_profiles_for_jobs
from jobs.queue_eta import refresh_etas
from jobs.services import job_transition
from jobs.shared_gpu_notes import agree_on_shared_gpus
from jobs.solo_first import hold_profiling_gpus, own_share, solo_first_queue
from jobs.states import JobStatus
from observability import metrics
from quotas.models import UsageEntry
from quotas.selectors import attained_gpu_seconds, cohort_quotas
from quotas.services import QuotaDenied, las_gpus
from scheduler.backends.base import ClusterBackend
from scheduler.model import ClusterSnapshot, Decision, JobRequest, Placement, TaskRequest, reserve
from scheduler.plugins.sim_interference import InterferenceMemo
from scheduler.policy import PolicyView, RunningJob, plan_cycle
from scheduler.policy.queue_sort import ServiceHistory

logger = logging.getLogger(__name__)

_RERUN_KEY = "jobs:scheduling-cycle:rerun"
# The "go again" mark outlives no lease holder for long: beat runs a cycle every few seconds anyway.
RERUN_TIMEOUT_S = 60
MAX_RERUNS = 3
ACTOR = "scheduler"
_ROUND_KEY = "jobs:scheduling-cycle:round"


def round_key() -> str:
    """The cache key of the round window the periodic rules last ran in."""
    return lease.scoped_key(_ROUND_KEY)


def rerun_key() -> str:
    """The cache key of the "go again" mark a cycle that found the lease taken leaves."""
    return lease.scoped_key(_RERUN_KEY)


# Completed jobs whose attained service feeds the Gittins index (the latest ones).
HISTORY_JOBS = 5000
# Kept across cycles of this process: the interference plugin's verdicts (only a cache: a verdict
# depends only on its key, so a worker restart costs recomputation, never a different decision).
_MEMO = InterferenceMemo()


class JobRows:
    """Job rows (with their team, user and image) kept between cycles of this process, each under
    its rows' versions, so a cycle builds model objects only for the rows that changed since the last.

    The version is PostgreSQL's ``(xmin, ctid)`` of the job's, team's, user's and image's rows: every
    UPDATE writes a new row version (a new ``ctid``, and a new ``xmin`` from another transaction), so
    a cancel, a priority edit, a requeue or a waiting reason written by the cycle shows as a new
    version and the row is loaded again; locks (``SELECT ... FOR UPDATE``) leave it as it was. Other
    databases have no such column: every cycle loads every row there."""

    def __init__(self, *statuses: str) -> None:
        self.statuses = [str(s) for s in statuses]
        self._rows: dict[int, tuple[str, Job]] = {}
        self._parts: dict[int, tuple[Job, RequestParts]] = {}

    def load(self) -> list[Job]:
        """The jobs in ``statuses`` now, in the model's order (newest first)."""
        base = Job.objects.filter(status__in=self.statuses).select_related("team", "user", "image")
        versions = _row_versions(self.statuses)
        if versions is None:
            return list(base)
        stale = [pk for pk, version in versions.items() if self._rows.get(pk, ("", None))[0] != version]
        loaded: dict[int, Job] = {}
        for start in range(0, len(stale), 2000):
            loaded.update((j.pk, j) for j in base.filter(pk__in=stale[start : start + 2000]).order_by())
        # A row changed between the two reads is kept under the older version: loaded again next time.
        rows = {pk: (versions[pk], loaded[pk]) for pk in stale if pk in loaded}
        rows.update((pk, self._rows[pk]) for pk in versions if pk not in rows and pk in self._rows)
        self._rows = {pk: row for pk, row in rows.items() if pk in versions}
        self._parts = {pk: p for pk, p in self._parts.items() if self._kept(pk, p[0])}
        jobs = [job for _version, job in self._rows.values()]
        jobs.sort(key=lambda j: (j.created_at, j.pk), reverse=True)  # Job.Meta.ordering
        return jobs

    def _kept(self, pk: int, job: Job) -> bool:
        row = self._rows.get(pk)
        return row is not None and row[1] is job

    def parts(self, job: Job) -> RequestParts:
        """``RequestParts.of(job)``, kept with the row while it is: the same object is the same row
        version (a new version is a new object; ``forget`` drops one the cycle may change)."""
        known = self._parts.get(job.pk)
        if known is not None and known[0] is job:
            return known[1]
        parts = RequestParts.of(job)
        if self._kept(job.pk, job):
            self._parts[job.pk] = (job, parts)
        return parts

    def forget(self, pk: int) -> None:
        """Drop a row whose object the cycle handed on (an admission may change it in memory)."""
        self._rows.pop(pk, None)
        self._parts.pop(pk, None)

    def clear(self) -> None:
        self._rows.clear()
        self._parts.clear()


def _row_versions(statuses: list[str]) -> dict[int, str] | None:
    """Job id -> the row versions of the job and of its team, user and image (PostgreSQL), for the
    jobs in ``statuses``; None on a database without row versions."""
    if connection.vendor != "postgresql":
        return None
    tables = [Job._meta.db_table] + [
        Job._meta.get_field(name).related_model._meta.db_table  # type: ignore[union-attr]
        for name in ("team", "user", "image")
    ]
    job, team, user, image = (connection.ops.quote_name(t) for t in tables)
    version = " || ".join(f"{a}.xmin::text || {a}.ctid::text" for a in ("j", "t", "u", "i"))
    sql = (
        f"SELECT j.id, {version} FROM {job} j JOIN {team} t ON t.id = j.team_id "
        f"JOIN {user} u ON u.id = j.user_id JOIN {image} i ON i.id = j.image_id "
        "WHERE j.status = ANY(%s)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [statuses])
        return {int(pk): str(v) for pk, v in cursor.fetchall()}


# The queue between cycles (see JobRows); like _MEMO, only a cache: a restart costs a full load.
_QUEUED = JobRows(JobStatus.QUEUED.value)
_RUNNING = JobRows(JobStatus.RUNNING.value, JobStatus.STARTING.value)


@dataclass
class CycleResult:
    admitted: list[int] = field(default_factory=list)
    pending: dict[int, str] = field(default_factory=dict)
    evicted: list[int] = field(default_factory=list)


def task_name(job_id: int, index: int) -> str:
    """Deterministic task name: a repeated bind finds the same task (idempotence)."""
    return f"job-{job_id}-{index}"


def clock() -> float:
    """The cycle's time (seconds since the epoch). Module-level so that a replay with a virtual clock
    can set ``jobs.scheduling.clock`` (and tests can inject time)."""
    return time.time()


def _now() -> float:
    # Looked up at call time, so an assignment to ``jobs.scheduling.clock`` takes effect.
    return float(globals()["clock"]())


def _expected_duration(job: Job) -> float | None:
    """What SJF-style rules may know of a job's length: its own limit, else (simulated backend) the
    duration it was given, which is the oracle the simulator's SJF uses too."""
    if job.max_runtime_seconds:
        return float(job.max_runtime_seconds)
    return float(job.sim_duration_seconds) if job.sim_duration_seconds else None


@dataclass(frozen=True)
class RequestParts:
    """What ``job_request`` reads of a job's row (and its team's, user's and image's): kept with the
    row by ``JobRows``, so an unchanged waiting job costs no model attribute reads per cycle."""

    tasks: tuple[dict[str, Any], ...]  # TaskRequest keyword arguments, one per replica
    fields: dict[str, Any]  # JobRequest keyword arguments but tasks, profile and attained_gpu_s
    hints: dict[str, str]
    attained_gpu_s: float  # Job.attained_gpu_seconds

    @classmethod
    def of(cls, job: Job) -> RequestParts:
        pk, image = job.pk, job.image
        shared = not job.gpus and bool(job.gpu_milli)
        task = {
            "cpu_milli": job.cpu_milli,
            "memory_mib": job.memory_mib,
            "gpus": job.gpus,
            "gpu_milli": job.gpu_milli if shared else 0,
            "gpu_memory_mib": job.gpu_memory_mib,
            "gpu_models": tuple(job.gpu_models or ()),
        }
        hints = {str(k): str(v) for k, v in (job.env or {}).items() if str(k).startswith("SCHED_")}
        if image.min_driver:
            hints["min_driver"] = image.min_driver
        fields = {
            "job_id": str(pk),
            "priority": job.priority,
            "submitted_at": (job.submitted_at or job.created_at).timestamp(),
            "team": job.team.slug,
            "user": job.user.username,
            "slowdown_tolerance": job.slowdown_tolerance,
            "preemptible": job.preemptible,
            "min_runtime_s": float(job.min_runtime_seconds),
            "allow_sharing": job.allow_sharing,
            "group": image.name,
            "expected_duration_s": _expected_duration(job),
        }
        tasks = tuple({"task_id": task_name(pk, i), **task} for i in range(job.replicas))
        return cls(tasks=tasks, fields=fields, hints=hints, attained_gpu_s=job.attained_gpu_seconds)


def job_request(
    job: Job,
    profile: dict[str, float | str] | None = None,
    *,
    attained_gpu_s: float | None = None,
    parts: RequestParts | None = None,
) -> JobRequest:
    """The scheduler's view of a job: one TaskRequest per replica, a gang.

    ``profile``: the job's measured solo profile (``jobs.profiling_services``), {} when unknown.
    ``attained_gpu_s``: its attained service over finished runs (default: ``Job.attained_gpu_seconds``).
    ``parts``: ``RequestParts.of(job)`` when the caller keeps it (``JobRows.parts``). Every call
    returns new objects: the policy may change what it is given.
    """
    parts = RequestParts.of(job) if parts is None else parts
    return JobRequest(
        tasks=[TaskRequest(**task) for task in parts.tasks],
        profile=dict(profile or {}),
        hints=dict(parts.hints),
        attained_gpu_s=parts.attained_gpu_s if attained_gpu_s is None else attained_gpu_s,
        **parts.fields,
    )


def _service_history() -> ServiceHistory:
    """Attained service of the latest completed jobs, per class (image name, GPUs), for the Gittins
    index."""
    history = ServiceHistory()
    done = (
        Job.objects.filter(status=JobStatus.SUCCEEDED.value)
        .order_by("-finished_at", "-id")
        .values_list("attained_gpu_seconds", "image__name", "gpus", "gpu_milli", "replicas")[:HISTORY_JOBS]
    )
    for attained, group, gpus, gpu_milli, replicas in reversed(list(done)):
        history.add((group, las_gpus(gpus=gpus, gpu_milli=gpu_milli, replicas=replicas)), float(attained))
    return history


def _borrowed(running: list[tuple[Job, float]]) -> set[int]:
    """Running jobs on borrowed GPUs: the quota ledger marks a team's excess over its guarantee on its
    newest admissions, again at each admission, release and guarantee change (quotas.services), so
    this reads the marks of now. Reclaim takes them first, and only while their team still holds more
    than its guarantee (scheduler.policy.cohort.reclaim)."""
    ids = {job.pk for job, _started in running}
    # Joined on the job's status rather than a list of every running job's id: Django prepares an
    # ``__in`` list value by value, which costs more than the query itself at a thousand jobs.
    borrowing = UsageEntry.objects.filter(
        job__status__in=[JobStatus.RUNNING.value, JobStatus.STARTING.value],
        released_at__isnull=True,
        borrowed_gpu_milli__gt=0,
    ).values_list("job_id", flat=True)
    return ids.intersection(borrowing)


def _running_jobs(
    snapshot: ClusterSnapshot,
    now: float,
    backend: ClusterBackend | None = None,
    jobs: list[Job] | None = None,
) -> list[RunningJob]:
    """RUNNING and STARTING jobs (``jobs``: as the caller read them), with their current run's start
    and placements (backend first)."""
    jobs = _RUNNING.load() if jobs is None else jobs
    if not jobs:
        return []
    attained = attained_gpu_seconds(job_ids=[j.pk for j in jobs])
    by_job: dict[str, list[Placement]] = defaultdict(list)
    for placement in snapshot.running:
        by_job[placement.job_id].append(placement)
    # The stored tasks only of the jobs the backend does not show (one query, not one per job).
    unseen = [j.pk for j in jobs if str(j.pk) not in by_job]
    stored: dict[int, list[Task]] = defaultdict(list)
    for task in Task.objects.filter(job_id__in=unseen).order_by("job_id", "index", "id") if unseen else []:
        stored[task.job_id].append(task)
    # A STARTING job's run has not begun: it counts from now (min_runtime protects it).
    starts = [(j, j.run_started_at.timestamp() if j.run_started_at else now) for j in jobs]
    borrowed = _borrowed(starts)
    running = []
    for job, started in starts:
        placements = by_job.get(str(job.pk)) or [task_placement(job, t) for t in stored[job.pk]]
        running.append(
            RunningJob(
                request=job_request(job, attained_gpu_s=attained.get(job.pk, 0.0), parts=_RUNNING.parts(job)),
                placements=placements,
                started_at=started,
                borrowed=job.pk in borrowed,
            )
        )
    if backend is not None:
        rates = _shared_rates(backend, running)
        for r in running:
            r.rate = rates.get(r.job_id)
    return running


def _shared_rates(backend: ClusterBackend, running: list[RunningJob]) -> dict[str, float]:
    """Measured progress rates of the jobs on a shared GPU (the slowest task of each), where the
    backend measures them (``TaskStatus.rate``; the simulated backend does, from its ground truth)."""
    shared = {r.job_id for r in running if r.shared}
    if not shared:
        return {}
    per_job: dict[str, list[float | None]] = defaultdict(list)
    for status in backend.task_statuses():
        if status.job_id in shared and status.phase == TaskPhase.RUNNING:
            per_job[status.job_id].append(status.rate)
    rates = {j: min(v for v in rs if v is not None) for j, rs in per_job.items() if None not in rs}
    # Where the backend measures no rate (local, Kubernetes), a measured co-location is the rate.
    return {**measured_rates([r for r in running if r.job_id in shared and r.job_id not in rates]), **rates}


def _is_round(now: float) -> bool:
    """Whether the periodic rules (preemption, unpacking, drains) run in this cycle: once per
    ``SCHEDULER_ROUND_SECONDS`` window of the clock (``ROUND_S``, as the simulator's rounds, by default)."""
    window = int(now // (settings.SCHEDULER_ROUND_SECONDS or ROUND_S))
    key = round_key()
    if cache.get(key) == window:
        return False
    cache.set(key, window, timeout=None)
    return True


@dataclass
class CycleView:
    """What one cycle decided on: the policy's view, and the waiting jobs by id."""

    view: PolicyView
    queued: dict[str, Job]
    # Waiting for preempted jobs to stop (left out of the policy's queue): job id -> victims.
    held: dict[int, list[int]]


def build_view(backend: ClusterBackend, *, now: float | None = None, rounds: bool | None = None) -> CycleView:
    """The policy's view from the backend (nodes, running placements) and the database (queue with
    attained service, running jobs, completed jobs' service history)."""
    now = _now() if now is None else now
    snapshot = backend.snapshot()
    snapshot.now = now
    add_pending_binds(snapshot)
    _reserve_migration_targets(snapshot)
    running_rows = _RUNNING.load()  # read once: the running tasks' profiles and the running jobs
    fill_running_task_profiles(snapshot, running_rows)
    hold_profiling_gpus(snapshot, now)  # PROFILE_NEW_JOBS: nothing is packed beside a job profiled alone
    queued = _QUEUED.load()
    # A preemptor whose victims still hold their GPUs waits for them, out of the policy's queue: were
    # it offered again, the policy would pick more victims for it every cycle of the grace period.
    held: dict[int, list[int]] = defaultdict(list)
    waiting_for = Job.objects.filter(status=JobStatus.PREEMPTING.value, preempted_for__isnull=False)
    for victim_id, preemptor_id in waiting_for.values_list("pk", "preempted_for_id"):
        held[preemptor_id].append(victim_id)
    offered = [j for j in queued if j.pk not in held]
    # What those held preemptors ask for is their team's, not lendable (scheduler.policy.cohort).
    held_milli: dict[int, int] = defaultdict(int)
    for j in queued:
        if j.pk in held:
            held_milli[j.team_id] += j.total_gpu_milli
    attained = attained_gpu_seconds(job_ids=[j.pk for j in offered])
    solo = solo_profiles_for_jobs(offered)
    # A backend that knows what a job is (the simulated one: the ground truth's job type in its env)
    # gives its profile, as the node agent would have measured it (manage.py replay relies on it). It
    # wins over a stored one: the simulated solo sampling stores that same ground truth, but with 0 %
    # SM and memory utilisation for what Gavel never measured, where the ground truth leaves them
    # missing, so the stored copy would change the interference model's inputs.
    known = getattr(backend, "job_profile", None)
    if callable(known):
        for j in offered:
            if found := known(j.env or {}):
                solo[j.pk] = found
    view = PolicyView(
        snapshot=snapshot,
        queue=[
            job_request(j, solo.get(j.pk), attained_gpu_s=attained.get(j.pk, 0.0), parts=_QUEUED.parts(j))
            for j in offered
        ],
        running=_running_jobs(snapshot, now, backend, running_rows),
        now=now,
        rounds=_is_round(now) if rounds is None else rounds,
        history=_service_history(),
        memo=_MEMO,
        quotas=cohort_quotas(held_for=dict(held_milli)),
    )
    view.queue = solo_first_queue(view.queue, [str(j.pk) for j in offered if j.pk not in solo], snapshot)
    return CycleView(view=view, queued={str(j.pk): j for j in queued}, held=dict(held))


def add_pending_binds(snapshot: ClusterSnapshot) -> None:
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
        placement = task_placement(task.job, task)
        reserve(node, placement)
        snapshot.running.append(placement)


def _persist_placement(job: Job, placements: list[Placement], *, why: str = "placed") -> bool:
    """QUEUED -> ADMITTED with Task rows, atomically; False if the job left QUEUED meanwhile."""
    _QUEUED.forget(job.pk)  # job_transition changes the object in memory, whatever the outcome
    placements = agree_on_shared_gpus(placements)  # in placement order, before sorting by index
    placements = sorted(placements, key=lambda p: int(p.task_id.rsplit("-", 1)[1]))
    where = ", ".join(f"{p.node} GPU {list(p.gpu_indices)}" for p in placements)
    first_reason = placements[0].reason if placements else ""
    fault_point("cycle.mid")
    with transaction.atomic():
        # Admission takes the quota in this transaction (job_transition reserves it under the job's
        # row lock, then the quota rows': the fixed lock order, as cancels and releases).
        try:
            with transaction.atomic():
                moved = job_transition(
                    job=job,
                    to=JobStatus.ADMITTED,
                    actor=ACTOR,
                    reason=f"{why} on {where}" + (f" ({first_reason})" if first_reason else ""),
                    expected_from=JobStatus.QUEUED,
                )
        except QuotaDenied as denied:
            # The policy's gate saw older quota state (a limit changed, a race): the job waits.
            Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED.value).update(
                pending_reason=denied.message[:500]
            )
            return False
        if not moved:
            return False
        _mark_borrowed(job)
        for index, p in enumerate(placements):
            Task.objects.update_or_create(
                job=job,
                index=index,
                defaults={
                    "name": task_name(job.pk, index),
                    **task_fields(p),
                    "phase": TaskPhase.PENDING,
                    "exit_code": None,
                    "message": "",
                    "started_at": None,
                    "finished_at": None,
                },
            )
        # Fencing: last thing before the commit, so a cycle that lost its lease persists nothing.
        lease.check()
        dispatch.request_bind(job.pk)
    metrics.record_placements(1)
    return True


def _mark_borrowed(job: Job) -> None:
    """Say in the admission event when the job runs on borrowed GPUs (beyond its team's guarantee)."""
    entry = UsageEntry.objects.filter(job=job, released_at__isnull=True).first()
    if entry is None or not entry.borrowed_gpu_milli:
        return
    event = JobEvent.objects.filter(job=job, to_status=JobStatus.ADMITTED.value).order_by("-id").first()
    if event is not None:
        note = (
            f"; on borrowed GPUs: {entry.borrowed_gpu_milli / 1000:g} beyond team {job.team.name}'s guarantee"
        )
        JobEvent.objects.filter(pk=event.pk).update(reason=(event.reason + note)[:2000])


def _fits(snapshot: ClusterSnapshot, placements: list[Placement]) -> bool:
    """Whether ``placements`` fit on the snapshot's free capacity now (no GPU oversubscribed)."""
    nodes = {n.name: n for n in snapshot.nodes}
    cpu: dict[str, int] = defaultdict(int)
    mem: dict[str, int] = defaultdict(int)
    milli: dict[tuple[str, int], int] = defaultdict(int)
    gpu_mem: dict[tuple[str, int], int] = defaultdict(int)
    for p in placements:
        node = nodes.get(p.node)
        if node is None or not node.schedulable or any(i >= len(node.gpus) for i in p.gpu_indices):
            return False
        cpu[p.node] += p.cpu_milli
        mem[p.node] += p.memory_mib
        for i in p.gpu_indices:
            milli[(p.node, i)] += p.gpu_milli
            gpu_mem[(p.node, i)] += p.gpu_memory_mib
    for name, need in cpu.items():
        node = nodes[name]
        if node.used_cpu_milli + need > node.cpu_milli or node.used_memory_mib + mem[name] > node.memory_mib:
            return False
    for (name, i), need in milli.items():
        gpu = nodes[name].gpus[i]
        if gpu.used_milli + need > 1000:
            return False
        if gpu.memory_mib and gpu.used_memory_mib + gpu_mem[(name, i)] > gpu.memory_mib:
            return False
    return True


def _reserve_migration_targets(snapshot: ClusterSnapshot) -> None:
    """Hold the planned targets of jobs migrating now (PREEMPTING, grace running), so the policy does
    not give them away before the moved job is back in the queue to take them."""
    nodes = {n.name: n for n in snapshot.nodes}
    moving = Job.objects.filter(status=JobStatus.PREEMPTING.value).exclude(planned_placement=[])
    for job in moving:
        target = _planned(job)
        if target and _fits(snapshot, target):
            for p in target:
                # Its own task id still names the run being stopped: the hold gets one of its own.
                hold = replace(p, task_id=f"{p.task_id}@migration-target")
                reserve(nodes[p.node], hold)
                snapshot.running.append(hold)


def _planned(job: Job) -> list[Placement]:
    """The migration target remembered on ``job``, as placements (task ids of this job only)."""
    out = []
    for raw in job.planned_placement or []:
        try:
            out.append(replace(Placement.from_dict(raw), job_id=str(job.pk)))
        except (KeyError, TypeError, ValueError):
            return []
    return out if len(out) == job.replicas else []


def _place_planned(cycle: CycleView, result: CycleResult) -> None:
    """Migrated jobs back in the queue go to their planned target first, while it still fits."""
    snapshot = cycle.view.snapshot
    placed: set[str] = set()
    for job_id, job in cycle.queued.items():
        if not job.planned_placement or job.pk in cycle.held:
            continue
        target = _planned(job)
        if target and _fits(snapshot, target):
            target = [replace(p, reason=p.reason or "the migration's planned target") for p in target]
            if _persist_placement(job, target, why="migrated to its planned target"):
                nodes = {n.name: n for n in snapshot.nodes}
                for p in target:
                    reserve(nodes[p.node], p)
                    snapshot.running.append(p)
                result.admitted.append(job.pk)
                placed.add(job_id)
        # Tried once: if the target no longer fits, the policy places the job like any other.
        Job.objects.filter(pk=job.pk).update(planned_placement=[])
    cycle.view.queue = [r for r in cycle.view.queue if r.job_id not in placed]


def _preempt(
    backend: ClusterBackend,
    job: Job,
    *,
    rule: str,
    preemptor: Job | None,
    reason: str,
    target: list[Placement] | None = None,
) -> bool:
    """RUNNING -> PREEMPTING (event naming the rule and the preemptor), then SIGTERM with the job's
    grace period on the backend. A migration also remembers its planned target. Returns False when
    the job was no longer RUNNING."""
    by = f" for job {preemptor.pk}" if preemptor is not None else ""
    kind = "migrated" if target is not None else "preempted"
    why = f"{kind} by rule {rule}{by}" + (f": {reason}" if reason else "")
    grace = job.grace_seconds
    with transaction.atomic():
        if not job_transition(
            job=job, to=JobStatus.PREEMPTING, actor=ACTOR, reason=why[:2000], expected_from=JobStatus.RUNNING
        ):
            return False
        counters: dict[str, Any] = {
            "preemption_rule": rule[:40],
            "preempted_for": preemptor,
            "preemptions": F("preemptions") + 1,
        }
        if target is not None:
            counters["migrations"] = F("migrations") + 1
            counters["planned_placement"] = [p.to_dict() for p in target]
        Job.objects.filter(pk=job.pk).update(**counters)
        # Fencing, as for placements: a cycle that lost its lease preempts nothing.
        lease.check()
    metrics.record_preemption(rule=rule, migration=target is not None)
    # After the commit: the sync that sees the tasks stop must find the job PREEMPTING. A lost
    # SIGTERM is not fatal: past its grace the sync (and the reconciler) delete the tasks.
    try:
        backend.preempt_job(str(job.pk), grace)
    except Exception:  # noqa: BLE001  (the job is PREEMPTING either way; see above)
        logger.warning("could not ask the backend to preempt job %s", job.pk, exc_info=True)
    logger.info("job %s %s (rule %s%s, grace %ss)", job.pk, kind, rule, by, grace)
    return True


def _apply_preemptions(
    backend: ClusterBackend, decision: Decision, cycle: CycleView
) -> dict[int, int | None]:
    """Evictions and migrations of the decision: victim job id -> its preemptor's job id (or None)."""
    ids = {int(e.job_id) for e in decision.evictions if e.job_id.isdigit()}
    ids |= {int(m.job_id) for m in decision.migrations if m.job_id.isdigit()}
    named = [e.preemptor for e in decision.evictions] + [m.preemptor for m in decision.migrations]
    preemptors = {int(x) for x in named if x.isdigit()}
    if not ids:
        return {}
    jobs = Job.objects.in_bulk(ids | preemptors)
    done: dict[int, int | None] = {}
    for eviction in decision.evictions:
        victim = jobs.get(int(eviction.job_id)) if eviction.job_id.isdigit() else None
        if victim is None or victim.pk in done:
            continue
        preemptor = jobs.get(int(eviction.preemptor)) if eviction.preemptor.isdigit() else None
        if preemptor is not None and preemptor.pk == victim.pk:
            preemptor = None  # unpacking names the job itself: nobody waits for its GPUs
        if _preempt(backend, victim, rule=eviction.rule, preemptor=preemptor, reason=eviction.reason):
            done[victim.pk] = preemptor.pk if preemptor else None
    for migration in decision.migrations:
        victim = jobs.get(int(migration.job_id)) if migration.job_id.isdigit() else None
        if victim is None or victim.pk in done:
            continue
        preemptor = jobs.get(int(migration.preemptor)) if migration.preemptor.isdigit() else None
        if preemptor is not None and preemptor.pk == victim.pk:
            preemptor = None
        # An empty ``to`` leaves the new place to the same cycle's placement pass.
        target = list(migration.to) or decision.placements_for(migration.job_id)
        if _preempt(
            backend, victim, rule=migration.rule, preemptor=preemptor, reason=migration.reason, target=target
        ):
            done[victim.pk] = preemptor.pk if preemptor else None
    return done


def _on_victims(placements: list[Placement], victims: list[Placement]) -> list[str]:
    """Job ids of ``victims`` that still hold a GPU (or, for a CPU-only task, the node) of
    ``placements``."""
    held = {(v.node, i): v.job_id for v in victims for i in v.gpu_indices}
    nodes = {v.node: v.job_id for v in victims}
    hit: list[str] = []
    for p in placements:
        for key in [(p.node, i) for i in p.gpu_indices] if p.gpu_indices else []:
            if key in held and held[key] not in hit:
                hit.append(held[key])
        if not p.gpu_indices and p.node in nodes and nodes[p.node] not in hit:
            hit.append(nodes[p.node])
    return hit


# Rows per UPDATE of waiting reasons: keeps each statement's CASE list (and its parameters) small.
WAITING_WRITE_BATCH = 500


def _record_waiting(waiting: list[tuple[Job, int, str]]) -> None:
    """Write each still-QUEUED job's queue position and reason, in a few statements.

    Only rows whose values changed since the cycle read them are written: a steady queue (the same
    order, the same reasons) costs no query at all, where one UPDATE per waiting job was the cycle's
    largest cost at thousands of waiting jobs (docs/benchmarks.md, platform)."""
    changed = [
        (job.pk, position, reason[:500])
        for job, position, reason in waiting
        if (job.pending_reason, job.queue_position) != (reason[:500], position)
    ]
    for start in range(0, len(changed), WAITING_WRITE_BATCH):
        batch = changed[start : start + WAITING_WRITE_BATCH]
        Job.objects.filter(pk__in=[pk for pk, _, _ in batch], status=JobStatus.QUEUED.value).update(
            pending_reason=Case(*(When(pk=pk, then=Value(reason)) for pk, _, reason in batch)),
            queue_position=Case(*(When(pk=pk, then=Value(position)) for pk, position, _ in batch)),
        )


def _cycle_once(backend: ClusterBackend, now: float | None = None) -> CycleResult:
    result = CycleResult()
    rounds: bool | None = None
    if not Job.objects.filter(status=JobStatus.QUEUED.value).exists():
        # With nobody waiting only the periodic rules can do anything (unpacking a shared GPU while
        # GPUs are idle), and only at a round.
        shared = Task.objects.filter(
            job__status=JobStatus.RUNNING.value, gpu_milli__gt=0, gpu_milli__lt=1000
        ).exists()
        if not shared or not _is_round(_now() if now is None else now):
            return result
        rounds = True
    cycle = build_view(backend, now=now, rounds=rounds)
    _place_planned(cycle, result)
    view = cycle.view
    policy = active_policy()
    if view.rounds and view.queue and settings.QUEUE_ETA:
        # Before this cycle's decision changes the view: the estimate replays the same policy.
        refresh_etas(replace(view, snapshot=view.snapshot.copy()), policy, cycle.queued)
    decision = plan_cycle(view, policy)
    order = decision.queue_order or "the policy's order"
    cache.set(queue_order_key(), order, timeout=None)
    preempted = _apply_preemptions(backend, decision, cycle)
    result.evicted = list(preempted)
    # GPUs of jobs being preempted (this cycle or earlier) stay taken until their tasks stop.
    stopping_ids = {str(pk) for pk in preempted}
    stopping_ids |= {
        str(pk) for pk in Job.objects.filter(status=JobStatus.PREEMPTING.value).values_list("pk", flat=True)
    }
    victims = [p for p in view.snapshot.running if p.job_id in stopping_ids]
    waiting_on: dict[int, list[str]] = {pk: [str(v) for v in vs] for pk, vs in cycle.held.items()}
    for victim, preemptor in preempted.items():
        if preemptor is not None:
            waiting_on.setdefault(preemptor, []).append(str(victim))
    # Preemptors waiting for their victims come first: the GPUs being freed are theirs.
    position = 0
    waiting: list[tuple[Job, int, str]] = []  # (job, queue position, reason): written at the end
    for job_id in sorted(waiting_on, key=lambda pk: pk):
        job = cycle.queued.get(str(job_id))
        if job is None or job.pk in result.admitted:
            continue
        if decision.placements_for(str(job_id)) and not _on_victims(
            decision.placements_for(str(job_id)), victims
        ):
            continue  # placed on free GPUs after all: persisted below
        position += 1
        names = ", ".join(sorted(set(waiting_on[job_id]), key=int))
        reason = f"#{position} in queue ({order}): waiting for preempted job {names} to stop"
        waiting.append((job, position, reason))
        result.pending[job.pk] = reason
    ranked = sorted(
        (r for r in view.queue if r.job_id in cycle.queued and int(r.job_id) not in result.pending),
        key=lambda r: decision.positions.get(r.job_id, 10**9),
    )
    for request in ranked:
        job = cycle.queued[request.job_id]
        placements = decision.placements_for(request.job_id)
        if placements and len(placements) == job.replicas:
            blocked = _on_victims(placements, victims)
            if not blocked:
                if _persist_placement(job, own_share(job, placements)):
                    result.admitted.append(job.pk)
                continue
            why = f"waiting for preempted job {', '.join(sorted(blocked, key=int))} to stop"
        else:
            why = decision.unschedulable.get(request.job_id, "waiting for resources")
        position += 1
        reason = f"#{position} in queue ({order}): {why}"
        waiting.append((job, position, reason))
        result.pending[job.pk] = reason
    _record_waiting(waiting)
    return result


def run_scheduling_cycle(*, backend: ClusterBackend | None = None) -> CycleResult | None:
    """Run one cycle under the scheduling lease (jobs.lease). Returns None when another cycle holds it.

    Triggers that arrive while a cycle runs are not lost: they set a mark and the running cycle goes
    round again (at most MAX_RERUNS times; beat covers the rest). A cycle that loses its lease midway
    stops at once: what it persisted before is valid (it held the lease then), the rest is left to the
    next holder.
    """
    dispatch.cycle_started()
    with lease.held() as holding:
        if holding is None:
            cache.set(rerun_key(), 1, timeout=RERUN_TIMEOUT_S)
            return None
        backend = backend or get_backend()
        total = CycleResult()
        try:
            for _ in range(1 + MAX_RERUNS):
                cache.delete(rerun_key())
                with metrics.cycle_timer():
                    result = _cycle_once(backend)
                total.admitted += result.admitted
                total.evicted += result.evicted
                total.pending = result.pending
                if not cache.get(rerun_key()):
                    break
        except lease.LeaseLost:
            logger.warning(
                "scheduling cycle stopped: it lost its lease (admitted so far: %s)", total.admitted
            )
            return total
        heartbeat.beat("cycle")
        if total.admitted:
            logger.info("scheduling cycle admitted jobs %s", total.admitted)
        return total

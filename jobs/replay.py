"""Replay a job trace through the platform itself, on a virtual clock (``manage.py replay``).

The proof that the platform runs what the simulator measures (issue 16, section 6). The trace is
read with the simulator's loader and sliced as ``python -m scheduler simulate --start/--limit`` does
(a slice starts at time 0); every job gets the simulator's seeded job-type draw and the simulator's
request shape for the policy (whole GPUs, or the half-GPU share of ``ours``/Gandiva). Then the
platform's real code runs it:

* ``jobs.services.job_submit`` as a member of a team, at the job's submit time (one job image per
  trace group: the platform's ``JobRequest.group`` is the image name, the simulator's is the group);
* ``jobs.scheduling.run_scheduling_cycle`` (view from the database and the backend, ``plan_cycle``,
  evictions, placements) with ``SCHEDULER_POLICY`` set to the policy;
* ``jobs.binding.job_bind`` for each bind the cycle enqueues, ``jobs.sync.sync_status`` for status;
* :class:`scheduler.backends.simulated.SimulatedBackend` on the simulator's YAML cluster, with the
  simulator's performance ground truth (``scheduler.sim.perf``) deciding how fast each task runs.

The clock is virtual and jumps from event to event (``time_machine``: every ``time.time()`` and
``timezone.now()`` of the platform reads it): arrivals, the backend's next task end, the scheduling
beat and the rounds. The cadence is the simulator's (``SimConfig``): a cycle on the ``cycle_s`` grid
after anything changed, and the policy's periodic rules (``PolicyView.rounds``) at multiples of
``round_s`` while they can matter (jobs wait and others run, or a GPU is shared); a round that frees
GPUs is followed by a status sync and a cycle at the same instant, as in the simulator. Preempted
jobs get a zero grace period by default (the simulator frees their GPUs at once) and pay the
simulator's 30 s restart cost on their next run (the backend's checkpoint model).

Messages the platform would send to its workers (``jobs.dispatch``) are taken by the replay, which
is the worker and the beat: binds and stops run at once, scheduling cycles on the beat, status syncs
at every event. Nothing else of the platform is replaced.

Output: the simulator's per-policy metrics (``scheduler.sim.metrics.summarise``: ``avg_jct_s``,
``p99_jct_s``, ``preemptions``, ``migrations``, ``jobs``, ...) from the jobs' database rows (submit,
first start, finish) and the backend's allocation over time. ``preemptions`` counts evictions
(``Job.preemptions`` less ``Job.migrations``), as the simulator counts them apart.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db.models import Sum
from django.test import override_settings

from accounts.models import Membership, Role, Team
from images.models import JobImage
from jobs import binding, dispatch, scheduling, sync
from jobs.models import Job
from jobs.replay_eta import EtaLog
from jobs.replay_teams import TEAM_MODES, owner_of, set_up_teams
from jobs.services import job_submit
from jobs.specs import JobSpec
from jobs.states import TERMINAL, JobStatus
from quotas.models import Quota
from scheduler.backends.simulated import JOB_TYPE_ENV, TOLERANCE_ENV, SimulatedBackend
from scheduler.policy import get_policy
from scheduler.policy.packing import shared_request
from scheduler.policy.round import round_may_act
from scheduler.sim.cluster import ClusterSpec, load_cluster_spec
from scheduler.sim.engine import SimConfig, SimResult
from scheduler.sim.metrics import summarise
from scheduler.sim.perf import PerfModel, load_perf_model
from scheduler.sim.trace import TraceJob, load_trace

logger = logging.getLogger(__name__)

# Virtual time 0 (the slice's first submission). Any fixed instant would do; a month start keeps the
# monthly GPU-hour quota window out of the way.
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()
TEAM_SLUG = "replay"
USERNAME = "replay"
BIG = 2_000_000_000
# The simulator's task sizes (scheduler.policy.packing): per whole GPU, and for a shared task.
WHOLE_CPU_MILLI = 4000
WHOLE_MEMORY_MIB = 32 * 1024
SHARED_CPU_MILLI = 1000
SHARED_MEMORY_MIB = 8 * 1024


# Turns of the loop the cluster may name the event the clock is already at (a bind at that very
# instant can add one) before the replay counts as stuck.
SAME_EVENT_LIMIT = 1000


class ReplayError(ValueError):
    """Bad input: unknown trace, cluster or policy, a slice with no job, a job bigger than the cluster."""


@dataclass
class ReplayConfig:
    trace: Path
    cluster: str
    policy: str
    data_dir: Path
    seed: int = 0
    start: int = 0
    limit: int | None = None
    cycle_s: float = 10.0
    round_s: float = 360.0
    grace_s: float = 0.0
    restart_penalty_s: float = 30.0
    slowdown_tolerance: float = 1.5
    progress: Callable[[int, int], None] | None = None
    # None: every job in one team that holds the whole trace (the default). "vc": a team per trace
    # team with guarantees in proportion to demand, as the simulator's team benchmarks (replay_teams).
    teams: str | None = None
    # Whole GPUs for every job, as the simulator's team replay (scheduler.bench.team_sim) asks.
    whole_gpus: bool = False
    # Record the platform's queue ETAs (jobs.replay_eta) for scoring against the actual starts.
    eta: bool = False


@dataclass
class PlannedJob:
    """One trace job as the platform is asked for it."""

    index: int
    trace: TraceJob
    job_type: str
    spec: JobSpec
    image: str  # the image name: the trace group


@dataclass
class ReplayOutcome:
    """Per job (trace order): database id, submit, first start and finish (virtual seconds)."""

    config: ReplayConfig
    spec: ClusterSpec
    jobs: list[PlannedJob]
    job_ids: list[int]
    submit: np.ndarray
    first_start: np.ndarray
    finish: np.ndarray
    preemptions: int
    migrations: int
    cycles: int
    wall_s: float
    t: list[float] = field(default_factory=list)
    alloc: list[float] = field(default_factory=list)
    useful: list[float] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    unhandled_messages: dict[str, int] = field(default_factory=dict)
    approximated_shapes: int = 0
    # With ``config.teams``: trace team -> guarantee (whole GPUs). With ``config.eta``: the estimates.
    guarantees: dict[str, int] = field(default_factory=dict)
    eta_log: EtaLog | None = None

    def summary(self) -> dict[str, Any]:
        """The simulator's metrics (``scheduler.sim.metrics.summarise``) of this replay."""
        result = SimResult(
            policy=self.config.policy,
            cluster=self.spec.name,
            total_gpus=self.spec.total_gpus,
            submit=self.submit,
            first_start=self.first_start,
            finish=self.finish,
            num_gpus=np.array([j.trace.num_gpus for j in self.jobs]),
            duration=np.array([j.trace.duration for j in self.jobs]),
            t=np.array(self.t),
            alloc=np.array(self.alloc),
            useful=np.array(self.useful),
            waiting=np.array(self.waiting),
            placements=0,
            violations=0,
            preemptions=self.preemptions,
            schedule_calls=self.cycles,
            wall_s=self.wall_s,
            migrations=self.migrations,
        )
        out = summarise(result)
        for key in ("placements", "tolerance_violations", "schedule_calls", "unpacks_on_idle"):
            out.pop(key, None)
        out["scheduling_cycles"] = self.cycles
        out["approximated_shapes"] = self.approximated_shapes
        if self.unhandled_messages:
            out["unhandled_messages"] = dict(self.unhandled_messages)
        return out


# ----------------------------------------------------------------------------- the trace as jobs


def slice_trace(trace_jobs: list[TraceJob], start: int, limit: int | None) -> list[TraceJob]:
    """The slice ``python -m scheduler simulate --start/--limit`` replays (shifted to start at 0)."""
    jobs = trace_jobs[start : start + limit] if limit else trace_jobs[start:]
    if start and jobs:
        origin = jobs[0].submit
        jobs = [replace(j, submit=j.submit - origin) for j in jobs]
    return jobs


def draw_job_types(jobs: list[TraceJob], perf: PerfModel, seed: int) -> list[int]:
    """The simulator's seeded job-type draw (``Simulator._make_jobs``): same generator, same order."""
    rng = random.Random(f"job-types:{seed}")
    types = perf.job_types
    by_family: dict[str, list[int]] = {}
    for i, t in enumerate(types):
        by_family.setdefault(t.family, []).append(i)
    out = []
    for tj in jobs:
        pool = by_family.get(tj.family) if tj.family else None
        r = rng.random()  # drawn even when the pool is fixed, as the simulator does
        choices = pool or list(range(len(types)))
        out.append(choices[int(r * len(choices))])
    return out


def _share_rule(policy: str) -> str:
    return get_policy(policy).share


def plan_jobs(
    jobs: list[TraceJob],
    spec: ClusterSpec,
    perf: PerfModel,
    policy: str,
    seed: int,
    tolerance: float,
    grace_s: float = 0.0,
    whole_gpus: bool = False,
) -> tuple[list[PlannedJob], int]:
    """Each trace job as a platform ``JobSpec``: the simulator's request for the policy. Returns the
    jobs and how many had to be approximated (see below).

    Whole GPUs: the simulator splits a job into tasks of at most a node's GPUs (12 on 8-GPU nodes: 8 +
    4); the platform's replicas are all alike, so a job whose GPUs do not split evenly gets the
    largest even split (12: 2 x 6) and is counted as approximated. ``whole_gpus``: no job is given
    the policy's shared request."""
    share = _share_rule(policy)
    types = draw_job_types(jobs, perf, seed)
    node_gpus = max(g.gpus for g in spec.groups)
    min_gpu_memory = min(g.gpu_memory_mib for g in spec.groups)
    out: list[PlannedJob] = []
    approximated = 0
    for i, (tj, t_idx) in enumerate(zip(jobs, types, strict=True)):
        jt = perf.job_types[t_idx]
        env = {JOB_TYPE_ENV: jt.name, TOLERANCE_ENV: f"{tolerance:g}"}
        common: dict[str, Any] = {
            "name": f"trace-{tj.job_id}"[:100],
            "command": ["train", "--job-type", jt.name],
            "env": env,
            "sim_duration_seconds": float(tj.duration),
            "slowdown_tolerance": tolerance,
            "preemption_grace_seconds": int(grace_s),
        }
        shared = None if whole_gpus else shared_request(share, tj.num_gpus, jt.memory_mib, min_gpu_memory)
        if shared is not None:
            milli, memory = shared
            job_spec = JobSpec(
                **common,
                gpu_milli=milli,
                gpu_memory_mib=memory,
                cpu_milli=SHARED_CPU_MILLI,
                memory_mib=SHARED_MEMORY_MIB,
            )
        else:
            per = min(tj.num_gpus, node_gpus)
            while tj.num_gpus % per:
                per -= 1
            if tj.num_gpus > node_gpus and tj.num_gpus % node_gpus:
                approximated += 1
            job_spec = JobSpec(
                **common,
                gpus=per,
                replicas=tj.num_gpus // per,
                cpu_milli=WHOLE_CPU_MILLI * per,
                memory_mib=WHOLE_MEMORY_MIB * per,
            )
        out.append(PlannedJob(i, tj, jt.name, job_spec, image=f"trace-{tj.group or 'default'}"[:100]))
    return out, approximated


# ----------------------------------------------------------------------------- the driver


def clock_at(timestamp: float) -> dt.datetime:
    """The instant to set the virtual clock to for an event at ``timestamp``: the next whole
    microsecond at or after it. The clock keeps microseconds only (a datetime); set to the event's
    float as is, it could read a fraction of a microsecond before the event, so the backend would
    never see the event happen and would name it as its next event for ever (the replay spun on one
    instant)."""
    micros = math.ceil(timestamp * 1_000_000)
    while micros / 1_000_000 < timestamp:  # the float product can round down
        micros += 1
    return dt.datetime.fromtimestamp(0, tz=dt.UTC) + dt.timedelta(microseconds=micros)


class _Broker:
    """Stands in for the Celery broker: keeps what the platform enqueues for the replay to run."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, tuple[object, ...]]] = []

    def enqueue(self, task_name: str, *args: object) -> None:
        self.messages.append((task_name, args))

    def take(self) -> list[tuple[str, tuple[object, ...]]]:
        out, self.messages = self.messages, []
        return out


@contextlib.contextmanager
def _taking_messages(broker: _Broker) -> Iterator[None]:
    original = dispatch._enqueue
    dispatch._enqueue = broker.enqueue  # type: ignore[assignment]
    try:
        yield
    finally:
        dispatch._enqueue = original  # type: ignore[assignment]


def _owner() -> tuple[Any, Team]:
    user_model = get_user_model()
    user, _ = user_model.objects.get_or_create(username=USERNAME)
    team, _ = Team.objects.get_or_create(slug=TEAM_SLUG, defaults={"name": "Trace replay"})
    Membership.objects.get_or_create(user=user, team=team, defaults={"role": Role.MEMBER})
    # The replay measures scheduling, not admission: the team's quota holds the whole trace.
    Quota.objects.update_or_create(
        team=team,
        defaults={
            "max_gpu_milli": BIG,
            # All of it guaranteed: nothing is borrowed, so the admission gate keeps the policy's order.
            "guaranteed_gpu_milli": BIG,
            "max_concurrent_jobs": BIG,
            "per_user_gpu_milli": BIG,
            "gpu_hours_per_month": 1e15,
        },
    )
    return user, team


def _images(jobs: list[PlannedJob]) -> dict[str, JobImage]:
    images: dict[str, JobImage] = {}
    for name in sorted({j.image for j in jobs}):
        images[name], _ = JobImage.objects.get_or_create(
            name=name, tag="replay", defaults={"description": "trace replay", "is_active": True}
        )
    return images


class _Replay:
    def __init__(
        self,
        config: ReplayConfig,
        backend: SimulatedBackend,
        jobs: list[PlannedJob],
        eta_log: EtaLog | None = None,
    ) -> None:
        self.cfg = config
        self.backend = backend
        self.jobs = jobs
        self.broker = _Broker()
        # The replay is the only writer of its jobs: the sync may skip the tasks it already settled.
        self.settled = sync.SettledTasks()
        self.job_ids: list[int] = []
        self.by_pk: dict[int, int] = {}
        self.cycles = 0
        self.unhandled: dict[str, int] = {}
        self.t: list[float] = []
        self.alloc: list[float] = []
        self.useful: list[float] = []
        self.waiting: list[int] = []
        self.policy = get_policy(config.policy)
        self.eta_log = eta_log
        self.guarantees: dict[str, int] = {}

    # -- the platform's workers

    def _drain(self) -> bool:
        """Run what the platform enqueued: binds and stops now; True when a cycle was asked for."""
        wants_cycle = False
        while True:
            messages = self.broker.take()
            if not messages:
                return wants_cycle
            for name, args in messages:
                if name == "bind_job":
                    binding.job_bind(job_id=int(str(args[0])), backend=self.backend)
                elif name == "stop_job":
                    sync.job_stop(job_id=int(str(args[0])), backend=self.backend)
                elif name == "run_scheduling_cycle":
                    wants_cycle = True
                elif name == "sync_status":
                    self._sync()
                else:
                    self.unhandled[name] = self.unhandled.get(name, 0) + 1

    def _sync(self) -> bool:
        """One status sync; True when GPUs were freed (a job ended or went back to the queue)."""
        result = sync.sync_status(backend=self.backend, settled=self.settled)
        freed = any(
            JobStatus(to).is_terminal or to in (JobStatus.QUEUED.value, JobStatus.REQUEUED.value)
            for _, to in result.transitions
        )
        self._drain()
        return freed

    def _cycle(self, now: float, rounds: bool) -> bool:
        """One scheduling cycle (a round when ``rounds``); True when it preempted anything."""
        # The platform runs its periodic rules in the first cycle of each round window; the replay
        # says which cycles are rounds, as the simulator's round events do.
        # (The platform's clock is epoch seconds: EPOCH is a multiple of round_s and cycle_s.)
        window = int((EPOCH + now) // getattr(scheduling, "ROUND_S", self.cfg.round_s))
        if rounds:
            cache.delete(scheduling.round_key())
        else:
            cache.set(scheduling.round_key(), window, timeout=None)
        result = scheduling.run_scheduling_cycle(backend=self.backend)
        self.cycles += 1
        self._drain()
        return bool(result and result.evicted)

    # -- the clock's events

    def _sample(self, now: float) -> None:
        alloc, useful = self.backend.utilisation()
        self.t.append(now)
        self.alloc.append(alloc)
        self.useful.append(useful)
        self.waiting.append(Job.objects.filter(status=JobStatus.QUEUED.value).count())

    def backend_total_gpus(self) -> int:
        return sum(len(n.gpus) for n in self.backend.snapshot().nodes)

    def _round_useful(self) -> bool:
        """The simulator's test (scheduler.policy.round.round_may_act), on the database's state."""
        if not round_may_act(self.policy, waiting=True, running=True, shared_gpus=True):
            return False  # a policy without periodic rules: no state to read
        waiting = Job.objects.filter(status=JobStatus.QUEUED.value).exists()
        running = waiting and Job.objects.filter(status=JobStatus.RUNNING.value).exists()
        if round_may_act(self.policy, waiting=waiting, running=running, shared_gpus=False):
            return True
        return round_may_act(
            self.policy, waiting=waiting, running=running, shared_gpus=self.backend.shared_gpus() > 0
        )

    def run(self, traveller: Any) -> None:
        cfg = self.cfg
        if cfg.teams is None:
            user, team = _owner()
            owners = [(user, team)] * len(self.jobs)
        else:
            teams = set_up_teams([j.trace for j in self.jobs], self.backend_total_gpus())
            self.guarantees = {name: t.guarantee_gpus for name, t in teams.items()}
            owners = [(t.user, t.team) for j in self.jobs for t in [owner_of(teams, j.trace)]]
        images = _images(self.jobs)
        n = len(self.jobs)
        next_arrival = 0
        next_cycle = math.inf
        next_round = math.inf
        dirty = False
        new = False
        done = 0
        reached: float | None = None  # the cluster event the clock was last moved to
        repeats = 0
        while done < n:
            backend_at = self.backend.next_event_at()
            # Once the clock is at an event the cluster names a later one; naming it again and again
            # means the clock never reaches it: fail loudly instead of spinning.
            repeats = repeats + 1 if backend_at is not None and backend_at == reached else 0
            if repeats > SAME_EVENT_LIMIT:
                raise RuntimeError(f"replay stuck: the cluster's next event at t={backend_at} never happens")
            t_back = backend_at - EPOCH if backend_at is not None else math.inf
            t_arr = self.jobs[next_arrival].trace.submit if next_arrival < n else math.inf
            now = min(t_back, t_arr, next_cycle, next_round)
            if now == math.inf:
                raise RuntimeError("replay stalled: jobs wait but nothing can ever run")
            traveller.move_to(clock_at(EPOCH + now))
            reached = backend_at if t_back <= now else None
            if t_back <= now:
                # A task changed phase now: the status sync sees it when it happens. (A sync at an
                # instant when nothing changed on the cluster changes nothing: skipped, it is costly.)
                dirty |= self._sync()
            while next_arrival < n and self.jobs[next_arrival].trace.submit <= now:
                planned = self.jobs[next_arrival]
                user, team = owners[next_arrival]
                job = job_submit(user=user, spec=planned.spec, image=images[planned.image], team=team)
                self.job_ids.append(job.pk)
                self.by_pk[job.pk] = planned.index
                next_arrival += 1
                new = True
            self._drain()
            if now >= next_round:
                next_round = math.inf
                preempted = self._cycle(now, rounds=True)
                # Jobs the round placed start now (no start-up time), as after every cycle: the sync
                # must see them now, or their runs would start in the database at the next cluster
                # event (later start, less attained service for the next round). Zero grace: the
                # victims stopped at once too, and their requeue frees GPUs now.
                self._sync()
                if preempted:
                    dirty = True
            if (dirty or new) and next_cycle == math.inf:
                next_cycle = math.ceil(now / cfg.cycle_s - 1e-9) * cfg.cycle_s if cfg.cycle_s > 0 else now
            if now >= next_cycle:
                # A cycle that preempts frees GPUs at once (zero grace): its preemptors are placed
                # by a cycle at the same instant, as in the simulator.
                for _ in range(3):
                    if not Job.objects.filter(status=JobStatus.QUEUED.value).exists():
                        break
                    preempted = self._cycle(now, rounds=False)
                    freed = self._sync()
                    if not (preempted and freed):
                        break
                dirty = new = False
                next_cycle = math.inf
                if self.eta_log is not None:
                    self.eta_log.after_cycle(EPOCH + now, self.backend)
            if next_round == math.inf and self._round_useful():
                next_round = (now // cfg.round_s + 1) * cfg.round_s
            # The replay's database holds only its own jobs: no list of ids to send with every event.
            ended = Job.objects.filter(status__in=[s.value for s in TERMINAL]).count()
            if ended != done:
                done = ended
                if cfg.progress is not None:
                    cfg.progress(done, n)
            self._sample(now)


def _load_inputs(config: ReplayConfig) -> tuple[list[TraceJob], ClusterSpec, PerfModel]:
    from scheduler.sim.cluster import ClusterSpecError
    from scheduler.sim.trace import TraceError

    try:
        trace = load_trace(config.trace, seed=config.seed)
        spec = load_cluster_spec(config.cluster, config.data_dir)
        perf = load_perf_model(config.data_dir / "interference" / "gavel", spec.gavel_gpu_type)
    except (TraceError, ClusterSpecError, FileNotFoundError) as exc:
        raise ReplayError(str(exc)) from exc
    jobs = slice_trace(trace.jobs, config.start, config.limit)
    if not jobs:
        raise ReplayError(f"the slice (--start {config.start}, --limit {config.limit}) holds no job")
    too_big = [j for j in jobs if j.num_gpus > spec.total_gpus]
    if too_big:
        raise ReplayError(
            f"{len(too_big)} job(s) need more GPUs than {spec.name} has ({spec.total_gpus}), e.g. "
            f"{too_big[0].job_id} with {too_big[0].num_gpus}"
        )
    return jobs, spec, perf


def run_replay(config: ReplayConfig, *, state_dir: Path | None = None) -> ReplayOutcome:
    """Replay ``config``'s trace slice through the platform in the current database (which it fills:
    run it on a database of its own; ``manage.py replay`` makes a temporary one)."""
    import time_machine

    from scheduler.policy import POLICY_NAMES

    if config.policy not in POLICY_NAMES:
        raise ReplayError(f"unknown policy {config.policy!r}; known: {', '.join(POLICY_NAMES)}")
    trace_jobs, spec, perf = _load_inputs(config)
    if config.teams is not None and config.teams not in TEAM_MODES:
        raise ReplayError(f"unknown --teams mode {config.teams!r}; known: {', '.join(TEAM_MODES)}")
    planned, approximated = plan_jobs(
        trace_jobs,
        spec,
        perf,
        config.policy,
        config.seed,
        config.slowdown_tolerance,
        config.grace_s,
        whole_gpus=config.whole_gpus,
    )
    with contextlib.ExitStack() as stack:
        folder = state_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="replay-")))
        state = folder / "simulated-cluster.json"
        backend = SimulatedBackend(
            state,
            cluster=str(config.cluster),
            time_scale=1.0,
            clock=time.time,  # the virtual clock below
            pending_s=0.0,
            startup_s=0.0,
            finished_retention_s=math.inf,
            perf=perf,
            restart_penalty_s=config.restart_penalty_s,
            data_dir=config.data_dir,
        )
        # The ETA setting is left as configured unless the ETAs are measured.
        eta_settings: dict[str, Any] = {"QUEUE_ETA": True} if config.eta else {}
        stack.enter_context(
            override_settings(
                **eta_settings,
                SCHEDULER_POLICY=config.policy,
                CLUSTER_BACKEND="simulated",
                SIM_STATE_PATH=str(state),
                SIM_CLUSTER=str(config.cluster),
                SIM_TIME_SCALE=1.0,
                PREEMPTION_GRACE_SECONDS=int(config.grace_s),
                # The debug cursor formats and keeps every query: at one sync per cluster event that
                # is a good part of a replay's time, and it changes nothing the replay measures.
                DEBUG=False,
                # A cache of its own: the replay's round marks and leases live on its virtual clock,
                # and must neither see nor disturb a running platform's.
                CACHES={
                    "default": {
                        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                        "LOCATION": f"replay-{id(config)}",
                    }
                },
            )
        )
        traveller = stack.enter_context(time_machine.travel(EPOCH, tick=False))
        eta_log = EtaLog(epoch=EPOCH) if config.eta else None
        replay = _Replay(config, backend, planned, eta_log)
        stack.enter_context(_taking_messages(replay.broker))
        if eta_log is not None:
            stack.enter_context(eta_log.recording())
        memo = getattr(scheduling, "_MEMO", None)
        if isinstance(memo, dict):
            memo.clear()  # a replay starts cold, like every simulator run
        cache.clear()
        backend.reset()
        wall0 = time.perf_counter()
        replay.run(traveller)
        wall = time.perf_counter() - wall0
    rows = {
        j.pk: j
        for j in Job.objects.filter(pk__in=replay.job_ids).only(
            "pk", "submitted_at", "started_at", "finished_at", "status", "preemptions", "migrations"
        )
    }
    not_done = [pk for pk, j in rows.items() if j.status != JobStatus.SUCCEEDED.value]
    if not_done:
        logger.warning("%d replayed job(s) did not succeed, e.g. job %s", len(not_done), not_done[0])

    def seconds(value: dt.datetime | None) -> float:
        return value.timestamp() - EPOCH if value is not None else math.nan

    ordered = [rows[pk] for pk in replay.job_ids]
    totals = Job.objects.filter(pk__in=replay.job_ids).aggregate(p=Sum("preemptions"), m=Sum("migrations"))
    migrations = int(totals["m"] or 0)
    return ReplayOutcome(
        config=config,
        spec=spec,
        jobs=planned,
        job_ids=list(replay.job_ids),
        submit=np.array([p.trace.submit for p in planned]),
        first_start=np.array([seconds(j.started_at) for j in ordered]),
        finish=np.array([seconds(j.finished_at) for j in ordered]),
        preemptions=int(totals["p"] or 0) - migrations,
        migrations=migrations,
        cycles=replay.cycles,
        wall_s=wall,
        t=replay.t,
        alloc=replay.alloc,
        useful=replay.useful,
        waiting=replay.waiting,
        unhandled_messages=replay.unhandled,
        approximated_shapes=approximated,
        guarantees=replay.guarantees,
        eta_log=eta_log,
    )


def sim_config(config: ReplayConfig) -> SimConfig:
    """The simulator configuration the replay follows (for running the simulator side by side)."""
    return SimConfig(
        seed=config.seed,
        cycle_s=config.cycle_s,
        round_s=config.round_s,
        preempt_penalty_s=config.restart_penalty_s,
        slowdown_tolerance=config.slowdown_tolerance,
    )

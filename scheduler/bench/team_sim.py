"""A trace replayed with teams through ``plan_cycle`` itself: the platform's cycle, its cohort gate,
reclaim and round (``scheduler.policy.plan``), on a simulated clock.

The fast simulator (``scheduler.sim.engine``) offers jobs to ``schedule()`` through its own queue
machinery and has no quota state; this replay builds a ``PolicyView`` (with ``TeamQuota`` per team
when quotas are on) at every cycle and applies the ``Decision`` as the platform does, so that what
the fairness and ETA benchmarks measure is the code the platform runs. It is slower: benchmarks
replay slices of a trace.

Model (stated, simple on purpose):

- A job needs ``duration`` seconds of work on its whole GPUs (rate 1; no sharing: requests do not
  allow it, so interference never applies); tasks as the simulator splits them (at most a node's
  GPUs per task).
- Cycles on the ``cycle_s`` grid after anything changed; the policy's periodic rules
  (``PolicyView.rounds``) in the cycle at each multiple of ``round_s`` while jobs wait.
- An eviction (reclaim, priority, LAS) stops the victim at once: its work up to then is kept, and
  its next run pays ``preempt_penalty_s`` (restore from its checkpoint). A placement on GPUs a victim
  of the same cycle held starts ``grace_s`` later (the platform holds it until the victim stops);
  the GPUs are its from the eviction on. A migration (drain) is a stop and a start elsewhere.
- Quotas: each team's guarantee (whole GPUs) and a maximum of the whole cluster; its fair-share
  factor from its decayed GPU-hours (``scheduler.policy.fair_share``, 7-day half-life), as the
  platform computes them; a team's running jobs are marked borrowed as the platform's quota ledger
  marks them (``scheduler.policy.cohort.borrowed_marks``: its excess on its newest admissions),
  again at every admission and release of the team.

Cycles run only when something changed (an arrival, an end, an eviction's victims back in the
queue) or at a round, as the simulator's; the state is sampled after every event for the reclaim
time. ``observer`` (optional) is called after every cycle with the replay (the ETA benchmark).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from scheduler.bench.fairness_metrics import Run, TeamSample
from scheduler.bench.team_guarantees import team_of
from scheduler.model import (
    GPU_MILLI,
    ClusterSnapshot,
    Decision,
    JobRequest,
    Placement,
    TaskRequest,
    reserve,
    unreserve,
)
from scheduler.policy.cohort import TeamQuota, borrowed_marks, request_milli
from scheduler.policy.fair_share import decayed_gpu_hours, fair_share_factors
from scheduler.policy.packing import WHOLE_CPU_MILLI, WHOLE_MEMORY_MIB
from scheduler.policy.plan import plan_cycle
from scheduler.policy.registry import Policy, get_policy
from scheduler.policy.round import round_may_act
from scheduler.policy.view import PolicyView, RunningJob
from scheduler.sim.cluster import ClusterSpec
from scheduler.sim.trace import TraceJob

EPS = 1e-9


class ReplayStalled(RuntimeError):
    """Jobs wait and nothing runs or arrives: no later cycle can decide otherwise."""


@dataclass
class TeamSimConfig:
    cycle_s: float = 10.0
    round_s: float = 360.0
    grace_s: float = 30.0
    preempt_penalty_s: float = 30.0
    quotas: bool = True
    half_life_s: float = 7 * 24 * 3600.0


@dataclass
class JobState:
    """One trace job in the replay."""

    trace: TraceJob
    request: JobRequest
    milli: int
    left_s: float
    first_start: float = math.nan
    finish: float = math.nan
    runs: list[Run] = field(default_factory=list)
    # Current run: when it started (or starts, after a grace), its end event's version.
    started_at: float = math.nan
    version: int = 0
    borrowed: bool = False

    @property
    def team(self) -> str:
        return self.request.team


@dataclass
class TeamSimResult:
    policy: str
    quotas: bool
    total_gpus: int
    teams: list[str]
    submit: np.ndarray
    first_start: np.ndarray
    finish: np.ndarray
    num_gpus: np.ndarray
    duration: np.ndarray
    runs: list[Run]
    samples: list[TeamSample]
    preemptions: int
    reclaims: int
    cycles: int


def _request(job: TraceJob, max_node_gpus: int) -> JobRequest:
    tasks: list[TaskRequest] = []
    left, k = job.num_gpus, 0
    while left > 0:
        g = min(left, max_node_gpus)
        tasks.append(
            TaskRequest(
                task_id=f"{job.job_id}/t{k}",
                cpu_milli=WHOLE_CPU_MILLI * g,
                memory_mib=WHOLE_MEMORY_MIB * g,
                gpus=g,
            )
        )
        left -= g
        k += 1
    return JobRequest(
        job_id=job.job_id, tasks=tasks, submitted_at=job.submit, team=team_of(job), group=job.group
    )


class TeamSimulator:
    def __init__(
        self,
        jobs: list[TraceJob],
        spec: ClusterSpec,
        policy: str | Policy,
        guarantees: Mapping[str, int],
        config: TeamSimConfig | None = None,
        observer: Callable[[TeamSimulator], None] | None = None,
    ) -> None:
        self.cfg = config or TeamSimConfig()
        self.policy = policy if isinstance(policy, Policy) else get_policy(policy)
        nodes, _ = spec.build_nodes()
        self.snapshot = ClusterSnapshot(nodes=nodes)
        self.node_index = {n.name: i for i, n in enumerate(nodes)}
        self.total_gpus = sum(len(n.gpus) for n in nodes)
        max_node = max(len(n.gpus) for n in nodes)
        too_big = [j for j in jobs if j.num_gpus > self.total_gpus]
        if too_big:
            raise ValueError(
                f"{too_big[0].job_id} needs {too_big[0].num_gpus} GPUs; the cluster has {self.total_gpus}"
            )
        self.jobs = [
            JobState(j, r, request_milli(r), j.duration) for j in jobs for r in [_request(j, max_node)]
        ]
        self.by_id = {s.request.job_id: s for s in self.jobs}
        self.guarantees = dict(guarantees)
        self.observer = observer
        self.now = 0.0
        self.queue: dict[str, JobState] = {}
        self.running: dict[str, JobState] = {}
        self.placements: dict[str, list[Placement]] = {}
        self.done: list[JobState] = []
        self.samples: list[TeamSample] = []
        self.preemptions = 0
        self.reclaims = 0
        self.cycles = 0
        self.last_view: PolicyView | None = None
        self.last_decision: Decision | None = None
        # Start times of runs held back by a grace period (the clock wakes there to sample).
        self.starts: list[float] = []

    # --- the view the platform would build -------------------------------------------------------
    def quotas(self) -> dict[str, TeamQuota] | None:
        if not self.cfg.quotas:
            return None
        used: dict[str, int] = {}
        jobs: dict[str, int] = {}
        for s in self.running.values():
            used[s.team] = used.get(s.team, 0) + s.milli
            jobs[s.team] = jobs.get(s.team, 0) + 1
        usage = {
            team: decayed_gpu_hours(
                ((r.start, r.end, r.gpus) for s in self.jobs for r in s.runs if s.team == team),
                now=self.now,
                half_life_s=self.cfg.half_life_s,
            )
            for team in self.guarantees
        }
        for s in self.running.values():
            run = (s.started_at, self.now, s.trace.num_gpus)
            usage[s.team] = usage.get(s.team, 0.0) + decayed_gpu_hours(
                [run], now=self.now, half_life_s=self.cfg.half_life_s
            )
        factors = fair_share_factors(usage, {t: float(g) for t, g in self.guarantees.items()})
        return {
            team: TeamQuota(
                team=team,
                guaranteed_milli=g * GPU_MILLI,
                max_milli=self.total_gpus * GPU_MILLI,
                used_milli=used.get(team, 0),
                used_jobs=jobs.get(team, 0),
                fair_share=factors[team],
            )
            for team, g in self.guarantees.items()
        }

    def running_job(self, s: JobState) -> RunningJob:
        attained = sum(r.gpus * (r.end - r.start) for r in s.runs)
        request = replace(s.request, attained_gpu_s=attained)
        return RunningJob(
            request=request,
            placements=self.placements[s.request.job_id],
            started_at=s.started_at,
            borrowed=s.borrowed,
        )

    def view(self, *, rounds: bool) -> PolicyView:
        queue = [
            replace(s.request, attained_gpu_s=sum(r.gpus * (r.end - r.start) for r in s.runs))
            for s in self.queue.values()
        ]
        return PolicyView(
            snapshot=self.snapshot, queue=queue, running=[self.running_job(s) for s in self.running.values()],
            now=self.now, rounds=rounds, quotas=self.quotas(),
        )  # fmt: skip

    # --- applying a decision ---------------------------------------------------------------------
    def _release(self, s: JobState) -> None:
        job_id = s.request.job_id
        for p in self.placements.pop(job_id):
            unreserve(self.snapshot.nodes[self.node_index[p.node]], p)
        self.snapshot.running = [p for p in self.snapshot.running if p.job_id != job_id]
        del self.running[job_id]
        s.version += 1
        start = min(s.started_at, self.now)
        s.runs.append(Run(s.team, float(s.trace.num_gpus), start, self.now))
        s.borrowed = False
        self._remark(s.team)

    def _remark(self, team: str) -> None:
        """Mark ``team``'s running jobs borrowed after its usage changed, as the platform's quota
        ledger does (``borrowed_marks``). ``running`` is in admission order: a job enters it when
        placed (also a migration's restart) and leaves it when it stops."""
        if not self.cfg.quotas:
            return
        newest_first = [s for s in reversed(self.running.values()) if s.team == team]
        excess = sum(s.milli for s in newest_first) - self.guarantees.get(team, 0) * GPU_MILLI
        marks = borrowed_marks([s.milli for s in newest_first], excess)
        for s, mark in zip(newest_first, marks, strict=True):
            s.borrowed = mark > 0

    def _stop(self, s: JobState) -> None:
        """Preempted or moved: work up to now is kept, the next run pays the restore."""
        s.left_s = max(0.0, s.left_s - max(0.0, self.now - s.started_at)) + self.cfg.preempt_penalty_s
        self._release(s)
        self.preemptions += 1

    def _start(
        self, s: JobState, placements: list[Placement], at: float, heap: list[tuple[float, int, str]]
    ) -> None:
        job_id = s.request.job_id
        for p in placements:
            reserve(self.snapshot.nodes[self.node_index[p.node]], p)
        self.snapshot.running += placements
        self.placements[job_id] = list(placements)
        self.running[job_id] = s
        self.queue.pop(job_id, None)
        s.started_at = at
        if math.isnan(s.first_start):
            s.first_start = at
        s.version += 1
        heapq.heappush(heap, (at + s.left_s, s.version, job_id))
        if at > self.now:
            heapq.heappush(self.starts, at)
        self._remark(s.team)

    def apply(self, decision: Decision, heap: list[tuple[float, int, str]]) -> bool:
        """Apply ``decision`` at ``self.now``; True when it changed anything."""
        victim_gpus: set[tuple[str, int]] = set()
        for eviction in decision.evictions:
            victim = self.running[eviction.job_id]
            victim_gpus |= {(p.node, g) for p in self.placements[eviction.job_id] for g in p.gpu_indices}
            self._stop(victim)
            self.reclaims += eviction.rule == "reclaim"
            self.queue[eviction.job_id] = victim
        moved = []
        for migration in decision.migrations:
            mover = self.running[migration.job_id]
            self._stop(mover)
            self.queue[migration.job_id] = mover
            moved.append((mover, list(migration.to)))
        for mover, to in moved:
            if to:
                self._start(mover, to, self.now, heap)
        grouped: dict[str, list[Placement]] = {}
        for p in decision.placements:
            grouped.setdefault(p.job_id, []).append(p)
        for job_id, placements in grouped.items():
            s = self.by_id[job_id]
            waits = (
                self.cfg.grace_s
                if any((p.node, g) in victim_gpus for p in placements for g in p.gpu_indices)
                else 0.0
            )
            self._start(s, placements, self.now + waits, heap)
        return bool(decision.evictions or decision.migrations or decision.placements)

    def sample(self) -> None:
        """What each team holds and waits for; a run held back by a grace still waits."""
        held: dict[str, int] = {}
        waiting: dict[str, list[int]] = {}
        for s in self.running.values():
            if s.started_at <= self.now + EPS:
                held[s.team] = held.get(s.team, 0) + s.milli
            else:
                waiting.setdefault(s.team, []).append(s.milli)
        for s in self.queue.values():
            waiting.setdefault(s.team, []).append(s.milli)
        self.samples.append(TeamSample(self.now, held, waiting))

    # --- the clock -------------------------------------------------------------------------------
    def run(self) -> TeamSimResult:
        heap: list[tuple[float, int, str]] = []
        arrivals = sorted(self.jobs, key=lambda s: s.trace.submit)
        nxt = 0
        n = len(self.jobs)
        next_cycle = next_round = math.inf
        cycle_s, round_s = self.cfg.cycle_s, self.cfg.round_s
        while len(self.done) < n:
            while heap and self.by_id[heap[0][2]].version != heap[0][1]:
                heapq.heappop(heap)
            t_end = heap[0][0] if heap else math.inf
            t_arr = arrivals[nxt].trace.submit if nxt < n else math.inf
            t_start = self.starts[0] if self.starts else math.inf
            now = min(t_end, t_arr, next_cycle, next_round, t_start)
            if now == math.inf:
                raise ReplayStalled(self._stall_message())
            self.now = now
            changed = False
            while self.starts and self.starts[0] <= self.now + EPS:
                heapq.heappop(self.starts)
            while heap and heap[0][0] <= self.now + EPS:
                _, version, job_id = heapq.heappop(heap)
                s = self.by_id[job_id]
                if s.version != version or job_id not in self.running:
                    continue
                self._release(s)
                s.finish = self.now
                self.done.append(s)
                changed = True
            while nxt < n and arrivals[nxt].trace.submit <= self.now + EPS:
                self.queue[arrivals[nxt].request.job_id] = arrivals[nxt]
                nxt += 1
                changed = True
            if changed and next_cycle == math.inf:
                # Cycles on the ``cycle_s`` grid (the platform's beat), batching what happened since.
                next_cycle = math.ceil(self.now / cycle_s - 1e-9) * cycle_s
            is_round = self.now >= next_round - EPS
            if self.now >= next_cycle - EPS or is_round:
                next_cycle = math.inf
                if is_round:
                    next_round = math.inf
                if self.queue and self._cycle(heap, rounds=is_round):
                    # Victims went back to the queue: they may fit in the next cycle.
                    next_cycle = self.now + cycle_s
            if next_round == math.inf and round_may_act(
                self.policy, waiting=bool(self.queue), running=bool(self.running), shared_gpus=False
            ):
                next_round = (self.now // round_s + 1) * round_s
            self.sample()
        return self._result()

    def _cycle(self, heap: list[tuple[float, int, str]], *, rounds: bool) -> bool:
        """One ``plan_cycle`` over the current view, applied; True when it evicted or moved a job."""
        view = self.view(rounds=rounds)
        self.last_view = view
        decision = plan_cycle(view, self.policy)
        self.last_decision = decision
        self.cycles += 1
        self.apply(decision, heap)
        if self.observer is not None:
            self.observer(self)
        return bool(decision.evictions or decision.migrations)

    def _stall_message(self) -> str:
        reasons = self.last_decision.unschedulable if self.last_decision is not None else {}
        job_id = next(iter(self.queue))
        return (
            f"replay stalled at t={self.now:.0f} s: {len(self.queue)} job(s) wait, {len(self.running)} run; "
            f"e.g. {job_id}: {reasons.get(job_id, 'no reason recorded')}"
        )

    def _result(self) -> TeamSimResult:
        jobs = self.jobs
        return TeamSimResult(
            policy=self.policy.name,
            quotas=self.cfg.quotas,
            total_gpus=self.total_gpus,
            teams=[s.team for s in jobs],
            submit=np.array([s.trace.submit for s in jobs]),
            first_start=np.array([s.first_start for s in jobs]),
            finish=np.array([s.finish for s in jobs]),
            num_gpus=np.array([s.trace.num_gpus for s in jobs]),
            duration=np.array([s.trace.duration for s in jobs]),
            runs=[r for s in jobs for r in s.runs],
            samples=self.samples,
            preemptions=self.preemptions,
            reclaims=self.reclaims,
            cycles=self.cycles,
        )

"""Discrete-event cluster simulator that runs ``scheduler.schedule()`` unchanged in simulated time.

Events: arrivals (trace submit times), completions (``start + remaining work / rate``, recomputed
whenever a job's rate changes because a co-tenant arrives or leaves), and periodic rounds (every
``round_s``, only while ``scheduler.policy.round.round_may_act`` says one could act). Scheduling
cycles run on a beat of ``cycle_s`` simulated seconds (the platform's periodic cycle; 0 = at every
event) and only when something changed since the last one.

Layout: the clock (this module: events, cycles, rounds), ``records`` (config, job records, result),
``state`` (start and release), ``queue`` (waiting jobs per shape in the policy's order), ``offer``
(which jobs and nodes a ``schedule()`` call gets), ``rates`` (the ground-truth progress) and
``round_state`` (the simulator's arrays as the policy's round reads them). No policy rule lives
here: a round is ``scheduler.policy.round.run_round`` (the same function ``plan_cycle`` runs for the
platform), which owns the order of the rules, the victim order, the outranks rule, the rules'
names and reasons; ``SimRoundState`` only answers its questions from the arrays (levels are
computed by the round from attained-service arrays) and applies an eviction (a preemption: release,
requeue, restart cost) or a migration (release, requeue, then a one-job cycle for the drain's
target and one for the moved jobs).

Why it is fast (none of this changes what ``schedule()`` decides for the jobs it is offered):
- After arrivals alone only the new jobs are offered (older waiting jobs did not fit in the previous
  cycle and nothing was freed since).
- The queue is one sorted list per request shape. A cycle merges, in queue order, the shapes that
  might fit (a whole-GPU task needs a node with that many idle GPUs; a shared task one GPU with enough
  free milli-GPU and memory; the job's GPU demand must not exceed the free capacity), looking at most
  ``scan_limit`` (4,096) jobs deep, and offers them until their demand reaches the free capacity or
  ``window`` (64) jobs; jobs a call could not place are skipped by the next call of the same cycle
  (at most ``max_calls_per_cycle``). ``schedule()`` places jobs one after another in the given order,
  so consecutive calls decide what one call over the window would.
- Offer pruning (keeps out of a call only jobs it would refuse): an exact fit check (a node with
  enough idle GPUs per task; for a shared task an idle GPU or a GPU with room next to residents of a
  slot kind not refused for the job's class), a failure memo per class until a release that could
  unblock it, the room left by the jobs already offered in the call, and whole-GPU shapes retired
  for the rest of a scan once one of their jobs cannot fit (see ``_cycle``, ``_FitCheck``, ``_Room``).
- The snapshot holds only nodes with free GPU capacity (a full node passes no filter), and of nodes
  of one hardware group in the same state only as many as the cycle has tasks (see
  ``_candidate_nodes``); the cluster state is updated incrementally, never rebuilt.

Ground truth for speed: ``scheduler.sim.perf`` (Gavel measured pairs, documented comm cost model).
Preemption costs ``preempt_penalty_s`` of lost work (checkpoint restore). Deterministic for a seed:
job types are drawn from ``random.Random(seed)``, ties break by trace order.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections import Counter
from collections.abc import Callable

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.frag.fragmentation import ShapeKey, TargetWorkload, task_shape
from scheduler.framework import BuiltProfile
from scheduler.model import GPU_MILLI, JobRequest, Node, Placement, TaskRequest
from scheduler.plugins.sim_interference import InterferenceMemo
from scheduler.policy.packing import (
    SHARED_CPU_MILLI,
    SHARED_MEMORY_MIB,
    WHOLE_CPU_MILLI,
    WHOLE_MEMORY_MIB,
    shared_request,
)
from scheduler.policy.queue_sort import QueuePriority
from scheduler.policy.registry import Policy, with_memo
from scheduler.policy.round import RoundOutcome, has_rounds, round_may_act, run_round
from scheduler.sim.cluster import ClusterSpec
from scheduler.sim.offer import SimOffer
from scheduler.sim.perf import PerfModel
from scheduler.sim.records import DONE, EPS, PENDING, RUNNING, SimConfig, SimResult, SlotKind, _Job
from scheduler.sim.round_state import SimRoundState
from scheduler.sim.trace import TraceJob

__all__ = ["DONE", "PENDING", "RUNNING", "SimConfig", "SimResult", "Simulator", "SlotKind", "_Job"]


class Simulator(SimOffer):
    """The clock (events, cycles on the ``cycle_s`` beat, rounds every ``round_s``) over the state
    (``scheduler.sim.state``), the queue, the offers and the rates; a round is the policy's
    (``scheduler.policy.round.run_round`` over ``SimRoundState``)."""

    def __init__(
        self,
        jobs: list[TraceJob],
        spec: ClusterSpec,
        policy: Policy,
        perf: PerfModel,
        config: SimConfig | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.cfg = config or SimConfig()
        self.spec = spec
        self.policy = policy
        # Queue keys of 2D-LAS policies; holds the completed jobs' service history of this run.
        self.priority = QueuePriority(policy.las_thresholds, policy.las_inner)
        self.perf = perf
        self.progress = progress
        # Every run starts cold (and sees the model it is given): its own verdict memo.
        self.memo = InterferenceMemo()
        self.built: BuiltProfile = with_memo(policy.profile, self.memo).build()
        self.nodes, self.links = spec.build_nodes()
        self.node_by_name = {n.name: i for i, n in enumerate(self.nodes)}
        self.max_node_gpus = max(len(n.gpus) for n in self.nodes)
        self.min_gpu_memory = min(g.memory_mib for n in self.nodes for g in n.gpus)
        offsets = [0]
        for n in self.nodes:
            offsets.append(offsets[-1] + len(n.gpus))
        self.offsets = offsets
        self.total_gpus = offsets[-1]
        self.gpu_node = np.repeat(np.arange(len(self.nodes)), [len(n.gpus) for n in self.nodes])
        self.free_milli = np.full(self.total_gpus, GPU_MILLI, dtype=np.int64)
        self.free_mem = np.array([g.memory_mib for n in self.nodes for g in n.gpus], dtype=np.int64)
        self.tenants: list[list[int]] = [[] for _ in range(self.total_gpus)]
        # Nodes have the CPU and memory of a whole-GPU task for every GPU (true of every shipped
        # spec): then only GPUs bind, and a release that frees no GPU capacity unblocks nobody.
        self.gpu_bound = all(
            n.cpu_milli >= WHOLE_CPU_MILLI * len(n.gpus) and n.memory_mib >= WHOLE_MEMORY_MIB * len(n.gpus)
            for n in self.nodes
        )
        self.node_capacity = np.array([len(n.gpus) * GPU_MILLI for n in self.nodes], dtype=np.int64)
        # Node group = identical hardware (same spec group), for the idle-node reduction.
        self.node_group = [int(n.name[1 : n.name.index("-")]) for n in self.nodes]
        self.shape_counts: Counter[ShapeKey] = Counter()
        self.arrived_tasks = 0
        self._workload: TargetWorkload | None = None
        self._workload_at = 0
        self._best_links: dict[tuple[int, int], str | None] = {}
        self._bottleneck: dict[tuple[int, tuple[int, ...]], str | None] = {}
        # The interned id of each node's signature (-1: recompute), for ``_candidate_nodes``.
        self.sig_id = np.full(len(self.nodes), -1, dtype=np.int64)
        self._sig_ids: dict[tuple[object, ...], int] = {}
        # What ``sim_interference``'s verdicts on a node depend on (see ``_verdict_key``), cached
        # like ``sig_id`` (reset when the node changes).
        self.node_vkey: list[tuple[object, ...] | None] = [None] * len(self.nodes)
        # Per node, a working copy for ``schedule()`` made when the node last changed (see
        # ``_SimSnapshot``), reset with ``sig_id``.
        self.node_clone: list[Node | None] = [None] * len(self.nodes)
        # The whole cluster as ``ClusterArrays``; a row is rewritten when its node's copy is remade
        # (``_offer``), and each ``schedule()`` call gets the offered rows (``ClusterArrays.take``).
        self.arrays = ClusterArrays.from_nodes(self.nodes)
        # Per node, the slot class of each GPU (-1: no residents or no room), from ``_slot_ids``.
        self.node_classes: list[list[int] | None] = [None] * len(self.nodes)
        # The same as a matrix (one row per node, -1 past its GPUs), rows rewritten with them.
        self.slot_class_mat = np.full((len(self.nodes), self.max_node_gpus), -1, dtype=np.int64)
        self._slot_ids: dict[tuple[object, ...], int] = {}
        # Residents per GPU slot (one row per node), for ``sim_interference``'s resident counts.
        self.tenant_count = np.zeros((len(self.nodes), self.max_node_gpus), dtype=np.int64)
        # Slot kind of each partly used GPU (None: recompute; see ``slot_kinds``), and the last
        # ``slot_kinds()`` answer, valid while ``gpu_moves`` (bumped on every start/release of a
        # shared job: whole GPUs go from idle to full and back, never partly used) holds.
        self.gpu_kind: list[SlotKind | None] = [None] * self.total_gpus
        self.gpu_moves = 0
        self.uses_interference = "sim_interference" in policy.profile.plugin_names()
        self.uses_gang_reservation = "balance_yield" in policy.profile.plugin_names()
        self.node_gpus = np.array([len(n.gpus) for n in self.nodes], dtype=np.int64)
        self._kinds_at = -1
        self._kinds_cache: dict[SlotKind, int] = {}
        # task id -> solo profile of running tasks, for interference-aware plugins.
        self.task_profiles: dict[str, dict[str, float | str]] = {}
        self.node_running: list[dict[str, Placement]] = [{} for _ in self.nodes]
        too_big = [j for j in jobs if j.num_gpus > self.total_gpus]
        if too_big:
            raise ValueError(
                f"{len(too_big)} job(s) need more GPUs than the cluster has ({self.total_gpus}), e.g. "
                f"{too_big[0].job_id} with {too_big[0].num_gpus}; use a bigger cluster spec"
            )
        self.jobs = self._make_jobs(jobs)
        self.task_owner: dict[str, int] = {
            t.task_id: j.idx for j in self.jobs if j.request is not None for t in j.request.tasks
        }
        # Task id -> (job type, request shape): what a resident's part of a slot class is.
        self.task_class: dict[str, tuple[int, tuple[tuple[int, int, int], ...]]] = {
            t.task_id: (j.type_idx, j.shape)
            for j in self.jobs
            if j.request is not None
            for t in j.request.tasks
        }
        # Mirrors of attained service and of the preemption guards for vectorised rounds.
        self.att = np.zeros(len(self.jobs))
        self.since = np.zeros(len(self.jobs))
        self.ngpus = np.array([j.trace.num_gpus for j in self.jobs], dtype=float)
        requests = [j.request for j in self.jobs if j.request is not None]
        self.job_priority = np.array([r.priority for r in requests], dtype=np.int64)
        self.job_preemptible = np.array([r.preemptible for r in requests], dtype=bool)
        self.job_min_runtime = np.array([r.min_runtime_s for r in requests], dtype=float)

    def _make_jobs(self, trace_jobs: list[TraceJob]) -> list[_Job]:
        rng = random.Random(f"job-types:{self.cfg.seed}")
        types = self.perf.job_types
        by_family: dict[str, list[int]] = {}
        for i, t in enumerate(types):
            by_family.setdefault(t.family, []).append(i)
        out: list[_Job] = []
        for idx, tj in enumerate(trace_jobs):
            pool = by_family.get(tj.family) if tj.family else None
            # Draw even when the pool is fixed so that type draws stay aligned across traces.
            r = rng.random()
            choices = pool or list(range(len(types)))
            t_idx = choices[int(r * len(choices))]
            job = _Job(idx, tj, t_idx, types[t_idx].memory_mib)
            job.request = self._request(job)
            job.shape = tuple((t.gpus, t.gpu_milli, t.gpu_memory_mib) for t in job.request.tasks)
            job.sizes = tuple(sorted((t.gpus for t in job.request.tasks if t.gpus), reverse=True))
            out.append(job)
        return out

    def _request(self, job: _Job) -> JobRequest:
        tj = job.trace
        jt = self.perf.job_types[job.type_idx]
        tasks: list[TaskRequest] = []
        share = shared_request(self.policy.share, tj.num_gpus, job.mem_mib, self.min_gpu_memory)
        suffix = f"#{job.type_idx}"
        if share is not None:
            milli, mem = share
            job.shared = True
            job.gpu_eq = milli / GPU_MILLI
            tasks.append(
                TaskRequest(
                    task_id=f"{tj.job_id}/t0{suffix}",
                    cpu_milli=SHARED_CPU_MILLI,
                    memory_mib=SHARED_MEMORY_MIB,
                    gpu_milli=milli,
                    gpu_memory_mib=mem,
                )
            )
        else:
            left = tj.num_gpus
            k = 0
            while left > 0:
                g = min(left, self.max_node_gpus)
                tasks.append(
                    TaskRequest(
                        task_id=f"{tj.job_id}/t{k}{suffix}",
                        cpu_milli=WHOLE_CPU_MILLI * g,
                        memory_mib=WHOLE_MEMORY_MIB * g,
                        gpus=g,
                    )
                )
                left -= g
                k += 1
            job.gpu_eq = float(tj.num_gpus)
        profile: dict[str, float | str] = {
            "model_family": jt.family,
            "job_type": jt.name,
            "batch_size": float(jt.batch_size),
            "gpu_memory_mib": float(job.mem_mib),
            "solo_throughput": float(self.perf.iso_tput.get(jt.name, 0.0)),
            "job_key": f"gavel:{self.perf.gpu_type}:{jt.name}",
        }
        job.tenant_profile = {**profile, "slowdown_tolerance": self.cfg.slowdown_tolerance}
        return JobRequest(
            job_id=tj.job_id,
            tasks=tasks,
            submitted_at=tj.submit,
            team=tj.group,
            slowdown_tolerance=self.cfg.slowdown_tolerance,
            profile=profile,
            hints={"model_family": jt.family},
        )

    def run(self) -> SimResult:
        wall0 = time.perf_counter()
        self.buckets: dict[tuple[tuple[int, int, int], ...], list[tuple[tuple[float, ...], int]]] = {}
        self.waiting = 0
        self.heap: list[tuple[float, int, int]] = []
        self.running: set[int] = set()
        self.shared_gids: set[int] = set()
        self.alloc_milli = 0
        self.useful = 0.0
        self.placements = 0
        self.violations = 0
        self.preemptions = 0
        self.schedule_calls = 0
        # Failure memo: a job's placement class (request shape, job type when shared, learnt
        # avoidances) -> the free epoch in which schedule() could not place it. Placements only use
        # capacity, so until something is released (the epoch moves) a class that failed fails again:
        # every filter is a feasibility test that more placements can only make harder (a shared task
        # fails only when no idle GPU fits, so idle-first admission cannot flip either).
        self.idle_epoch = 0  # moves when a release leaves a GPU idle
        self.slot_epoch = 0  # moves when a release leaves a shared GPU with room (or a GPU idle)
        self.failed_classes: dict[tuple[object, ...], tuple[int, int]] = {}
        # Placement class -> slot kinds schedule() refused for it (see _FitCheck).
        self.refused: dict[tuple[object, ...], set[SlotKind]] = {}
        # (class, milli-GPU, GPU memory) -> (gpu_moves, refusals, a kind has room): see _FitCheck.
        self.room_memo: dict[tuple[object, ...], tuple[int, int, bool]] = {}
        self.skipped_offers = 0
        self.deferred_offers = 0
        self.unpacks = 0
        self.migrations = 0
        self.last_round: RoundOutcome | None = None
        ts: list[float] = []
        alloc: list[float] = []
        useful: list[float] = []
        waiting: list[int] = []
        jobs = self.jobs
        n = len(jobs)
        next_arrival = 0
        done = 0
        next_round = float("inf")
        next_cycle = float("inf")
        needs_rounds = has_rounds(self.policy)
        dirty_freed = False
        new: list[_Job] = []
        quantum = self.cfg.cycle_s
        now = 0.0
        while done < n:
            while self.heap and jobs[self.heap[0][2]].version != self.heap[0][1]:
                heapq.heappop(self.heap)
            t_fin = self.heap[0][0] if self.heap else float("inf")
            t_arr = jobs[next_arrival].trace.submit if next_arrival < n else float("inf")
            now = min(t_fin, t_arr, next_round, next_cycle)
            if now == float("inf"):
                raise RuntimeError("simulation stalled: jobs wait but nothing can ever run")
            finished = False
            while self.heap and self.heap[0][0] <= now + EPS:
                _, version, idx = heapq.heappop(self.heap)
                job = jobs[idx]
                if job.version != version or job.state != RUNNING:
                    continue
                self._finish(job, now)
                done += 1
                finished = True
            if finished and self.progress is not None:
                self.progress(done)
            dirty_freed |= finished
            while next_arrival < n and jobs[next_arrival].trace.submit <= now:
                job = jobs[next_arrival]
                assert job.request is not None
                for task in job.request.tasks:
                    self.shape_counts[task_shape(task)] += 1
                    self.arrived_tasks += 1
                self._enqueue(job)
                new.append(job)
                next_arrival += 1
            if needs_rounds and now >= next_round:
                dirty_freed |= self._round(now)
                next_round = float("inf")
            if (dirty_freed or new) and next_cycle == float("inf"):
                # Cycles run on the grid of ``cycle_s`` (the platform's beat), batching what happened since.
                next_cycle = math.ceil(now / quantum - 1e-9) * quantum if quantum > 0 else now
            if now >= next_cycle:
                if self.waiting:
                    self._cycle(now, None if dirty_freed else [j for j in new if j.state == PENDING])
                dirty_freed = False
                new = []
                next_cycle = float("inf")
            if needs_rounds and next_round == float("inf") and self._round_useful():
                next_round = (now // self.cfg.round_s + 1) * self.cfg.round_s
            ts.append(now)
            alloc.append(self.alloc_milli / GPU_MILLI)
            useful.append(self.useful)
            waiting.append(self.waiting)
        return SimResult(
            policy=self.policy.name,
            cluster=self.spec.name,
            total_gpus=self.total_gpus,
            submit=np.array([j.trace.submit for j in jobs]),
            first_start=np.array([j.first_start for j in jobs], dtype=float),
            finish=np.array([j.finish for j in jobs], dtype=float),
            num_gpus=np.array([j.trace.num_gpus for j in jobs]),
            duration=np.array([j.trace.duration for j in jobs]),
            t=np.array(ts),
            alloc=np.array(alloc),
            useful=np.array(useful),
            waiting=np.array(waiting),
            placements=self.placements,
            violations=self.violations,
            preemptions=self.preemptions,
            schedule_calls=self.schedule_calls,
            wall_s=time.perf_counter() - wall0,
            unpacks_on_idle=self.unpacks,
            migrations=self.migrations,
            skipped_offers=self.skipped_offers,
            deferred_offers=self.deferred_offers,
        )

    def _round_useful(self) -> bool:
        return round_may_act(
            self.policy,
            waiting=bool(self.waiting),
            running=bool(self.running),
            shared_gpus=bool(self.shared_gids),
        )

    def _round(self, now: float) -> bool:
        """The policy's round (``scheduler.policy.round.run_round``) over this state; True when it
        evicted or moved a job (capacity may have been freed)."""
        self.last_round = run_round(self.policy, SimRoundState(self, now), now, self.cfg.window)
        return self.last_round.acted

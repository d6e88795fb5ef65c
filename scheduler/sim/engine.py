"""Discrete-event cluster simulator that runs ``scheduler.schedule()`` unchanged in simulated time.

Events: arrivals (trace submit times), completions (``start + remaining work / rate``, recomputed
whenever a job's rate changes because a co-tenant arrives or leaves), and periodic rounds (every
``round_s``, only while they can matter) where preemptive policies preempt and Gandiva unpacks.
Scheduling cycles run on a beat of ``cycle_s`` simulated seconds (the platform's periodic cycle; 0 =
at every event) and only when something changed since the last one.

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

import bisect
import heapq
import itertools
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from scheduler.frag.arrays import ClusterArrays
from scheduler.frag.fragmentation import ShapeKey, TargetWorkload, task_shape
from scheduler.framework import BuiltProfile, reserve, schedule, unreserve
from scheduler.model import GPU_MILLI, ClusterSnapshot, JobRequest, Node, Placement, TaskRequest
from scheduler.plugins.sim_interference import InterferenceMemo, SlotHints
from scheduler.policy.drain import drain_plan, first_blocked
from scheduler.policy.packing import (
    SHARED_CPU_MILLI,
    SHARED_MEMORY_MIB,
    WHOLE_CPU_MILLI,
    WHOLE_MEMORY_MIB,
    shared_request,
)
from scheduler.policy.preemption import choose_victims
from scheduler.policy.queue_sort import QueuePriority
from scheduler.policy.registry import Policy, with_memo
from scheduler.policy.unpacking import spare_gpus, unpack_on_idle, unpack_victim
from scheduler.sim.cluster import ClusterSpec
from scheduler.sim.perf import PerfModel, best_link, bottleneck_link, comm_rate
from scheduler.sim.trace import TraceJob

PENDING, RUNNING, DONE = 0, 1, 2
# (node group, resident job types, free milli-GPU, free GPU memory MiB) of a GPU with room and residents.
SlotKind = tuple[int, tuple[int, ...], int, int]
EPS = 1e-9


@dataclass
class SimConfig:
    seed: int = 0
    window: int = 64
    cycle_s: float = 10.0
    max_calls_per_cycle: int = 8
    scan_limit: int = 4096
    round_s: float = 360.0
    preempt_penalty_s: float = 30.0
    slowdown_tolerance: float = 1.5


class _Job:
    __slots__ = (
        "idx",
        "trace",
        "type_idx",
        "mem_mib",
        "request",
        "state",
        "remaining",
        "rate",
        "last",
        "first_start",
        "finish",
        "attained",
        "run_since",
        "gpu_eq",
        "placements",
        "gids",
        "version",
        "key",
        "violated",
        "violations",
        "preemptions",
        "shared",
        "started_at",
        "avoid",
        "tenant_profile",
        "shape",
        "sizes",
    )

    def __init__(self, idx: int, trace: TraceJob, type_idx: int, mem_mib: int) -> None:
        self.idx = idx
        self.trace = trace
        self.type_idx = type_idx
        self.mem_mib = mem_mib
        self.request: JobRequest | None = None
        self.state = PENDING
        self.remaining = trace.duration
        self.rate = 0.0
        self.last = 0.0
        self.first_start: float | None = None
        self.finish: float | None = None
        self.attained = 0.0
        self.run_since = 0.0
        self.gpu_eq = 0.0
        self.placements: list[Placement] = []
        self.gids: list[int] = []
        self.version = 0
        self.key: tuple[float, ...] = ()
        self.violated = False
        self.violations = 0
        self.preemptions = 0
        self.shared = False
        self.started_at = 0.0
        self.avoid: set[int] = set()
        self.tenant_profile: dict[str, float | str] = {}
        self.shape: tuple[tuple[int, int, int], ...] = ()
        self.sizes: tuple[int, ...] = ()  # whole-GPU task sizes, largest first


@dataclass
class SimResult:
    """Raw outcome of one run; ``scheduler.sim.metrics`` summarises it."""

    policy: str
    cluster: str
    total_gpus: int
    submit: np.ndarray
    first_start: np.ndarray
    finish: np.ndarray
    num_gpus: np.ndarray
    duration: np.ndarray
    # Change points: time, allocated GPUs (milli/1000), useful GPUs (sum gpus*rate), waiting jobs.
    t: np.ndarray
    alloc: np.ndarray
    useful: np.ndarray
    waiting: np.ndarray
    placements: int
    violations: int
    preemptions: int
    schedule_calls: int
    wall_s: float
    finished_count: np.ndarray = field(default_factory=lambda: np.zeros(0))
    unpacks_on_idle: int = 0
    migrations: int = 0
    skipped_offers: int = 0
    deferred_offers: int = 0


class Simulator:
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
        # Mirrors of attained service for vectorised 2D-LAS rounds.
        self.att = np.zeros(len(self.jobs))
        self.since = np.zeros(len(self.jobs))
        self.ngpus = np.array([j.trace.num_gpus for j in self.jobs], dtype=float)

    # ------------------------------------------------------------------ setup
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

    # ------------------------------------------------------------------ queue
    def _key(self, job: _Job) -> tuple[float, ...]:
        order = self.policy.order
        if order == "fifo":
            return (job.trace.submit, job.idx)
        if order == "sjf":
            return (job.trace.duration, job.trace.submit, job.idx)
        tj = job.trace
        return self.priority.key(job.attained, tj.group, tj.num_gpus, tj.submit, job.idx)

    # The queue is one sorted list per request shape: a cycle skips whole shapes that cannot fit
    # and merges the rest in key order, instead of rescanning a long prefix of jobs that wait for
    # more GPUs than are free.
    def _enqueue(self, job: _Job) -> None:
        job.state = PENDING
        job.key = self._key(job)
        bisect.insort(self.buckets.setdefault(job.shape, []), (job.key, job.idx))
        self.waiting += 1

    def _dequeue(self, job: _Job) -> None:
        bucket = self.buckets[job.shape]
        del bucket[bisect.bisect_left(bucket, (job.key, job.idx))]
        self.waiting -= 1

    def _queue_alive(
        self, shapes_ok: Callable[[_Job], bool], dead: set[tuple[tuple[int, int, int], ...]]
    ) -> Iterator[int]:
        """Like ``_queue_in_order``, but a shape added to ``dead`` while iterating yields no more jobs
        (k-way merge over the shape lists, each advanced only while its shape is alive)."""
        lists = [b for b in self.buckets.values() if b and shapes_ok(self.jobs[b[0][1]])]
        heap = [(b[0], i, 0) for i, b in enumerate(lists)]
        heapq.heapify(heap)
        while heap:
            (_, idx), i, pos = heapq.heappop(heap)
            bucket = lists[i]
            if self.jobs[idx].shape in dead:
                continue
            yield idx
            if pos + 1 < len(bucket) and self.jobs[idx].shape not in dead:
                heapq.heappush(heap, (bucket[pos + 1], i, pos + 1))

    def _queue_in_order(self, shapes_ok: Callable[[_Job], bool] | None = None) -> Iterator[int]:
        """Waiting job indices in queue order, only from shapes ``shapes_ok`` accepts."""
        lists = []
        for bucket in self.buckets.values():
            if bucket and (shapes_ok is None or shapes_ok(self.jobs[bucket[0][1]])):
                lists.append(bucket)
        if len(lists) == 1:
            return (idx for _, idx in lists[0])
        return (idx for _, idx in heapq.merge(*lists))

    # ------------------------------------------------------------------ run
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
        self.skipped_offers = 0
        self.deferred_offers = 0
        self.unpacks = 0
        self.migrations = 0
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
        needs_rounds = self.policy.preemptive or self.policy.introspective or self.policy.defragment
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

    # ------------------------------------------------------------------ cycle
    def _cycle(self, now: float, only: list[_Job] | None) -> None:
        """One scheduling cycle, as a few ``schedule()`` calls over consecutive slices of the queue.

        Each call gets the next waiting jobs (in queue order) that might fit, until their total GPU
        demand reaches the free capacity (in GPU-equivalents) or ``window`` jobs; jobs it could not
        place are skipped by the next call, which sees the cluster after the earlier placements.
        Because ``schedule()`` places jobs one after another in the given order, the slices give the
        decisions one call over the whole window would, without offering hundreds of jobs that
        cannot all fit.
        """
        failed: set[int] = set()
        if only is not None:
            candidates = sorted(only, key=lambda j: j.key)
        for _ in range(self.cfg.max_calls_per_cycle):
            fits = _FitCheck(self)
            room = _Room(self, fits)
            budget = float(self.free_milli.sum()) / GPU_MILLI
            offer: list[_Job] = []
            demand = 0.0
            if only is not None:
                source = (j for j in candidates if j.state == PENDING)
            dead: set[tuple[tuple[int, int, int], ...]] = set()
            if only is not None:
                source = (j for j in candidates if j.state == PENDING)
            else:
                ok = _ShapeCheck(fits, budget)
                source = (
                    self.jobs[idx]
                    for idx in itertools.islice(self._queue_alive(ok, dead), self.cfg.scan_limit)
                )
            for job in source:
                if len(offer) >= self.cfg.window or demand >= budget - EPS:
                    break
                # Whole-GPU jobs of one shape are alike for every test below (budget, fit, failure
                # memo, room), and all only tighten during a call: one that fails retires its shape
                # for the rest of the scan (a long queue is not walked job by job).
                whole = not job.shared and not job.avoid
                if job.idx in failed or job.gpu_eq > budget - demand + EPS or not fits(job):
                    if whole and job.idx not in failed:
                        dead.add(job.shape)
                    continue
                if self.failed_classes.get(self._class(job)) == self._epoch(job):
                    # Same class failed since the last release: schedule() would refuse it again.
                    failed.add(job.idx)
                    self.skipped_offers += 1
                    if whole:
                        dead.add(job.shape)
                    continue
                if not room.take(job):
                    # What the jobs offered before it take leaves it no room: it waits for the
                    # next call (not marked failed), which sees where they really went.
                    self.deferred_offers += 1
                    if room.empty():
                        break
                    if whole:
                        dead.add(job.shape)
                    continue
                offer.append(job)
                demand += job.gpu_eq
            if not offer:
                return
            placed_any = self._offer(offer, now, failed)
            if not placed_any and len(offer) < self.cfg.window and demand < budget - EPS:
                return

    def _offer(self, offer: list[_Job], now: float, failed: set[int]) -> bool:
        nodes, running, ids = self._candidate_nodes(sum(len(j.request.tasks) for j in offer if j.request))
        snapshot = _SimSnapshot(nodes=nodes, running=running, now=now, task_profiles=self.task_profiles)
        clones = self.node_clone
        arrays = self.arrays
        for i in ids:
            if clones[i] is None:
                clones[i] = ClusterSnapshot(nodes=[self.nodes[i]]).copy().nodes[0]
                # The node changed since its row was last written (a start or release drops the copy).
                arrays.refresh_row(i, self.nodes[i], self.node_running[i].values())
        snapshot.clones = [clones[i] for i in ids]  # type: ignore[misc]
        requests = []
        for job in offer:
            assert job.request is not None
            if job.avoid:
                job.request.hints["avoid_types"] = ",".join(str(t) for t in sorted(job.avoid))
            requests.append(job.request)
        self.schedule_calls += 1
        workload = self._target_workload()
        data: dict[str, object] = {"target_workload": workload}
        if self.uses_gang_reservation and workload.gang_gpu_share:
            data["gang_counts_outside"] = self._gang_counts_outside(ids)
        if self.uses_interference:
            # For ``sim_interference``'s memos across calls (see ``_verdict_key``): per offered node
            # its key, group and free milli-GPU (a row whose free milli moves during the call no
            # longer matches its key), the slot class of each GPU slot, and what the plugin needs to
            # intern the classes of rows the call changes (the class table, task id -> class part).
            vkeys, classes = self.node_vkey, self.node_classes
            width = (int(self.node_gpus[ids].max()) if ids else 0) or 1
            mat = self.slot_class_mat
            for i in ids:
                if vkeys[i] is None:
                    vkeys[i], row = self._verdict_key(i)
                    classes[i] = row
                    mat[i, : len(row)] = row
            hints = SlotHints(
                node_keys=[vkeys[i] for i in ids],
                node_group=[self.node_group[i] for i in ids],
                node_free=np.add.reduceat(self.free_milli, self.offsets[:-1])[ids],
                slot_class=mat[ids, :width],
                slot_ids=self._slot_ids,
                task_class=self.task_class,
            )
            data["slot_hints"] = hints
        taken = arrays.take(ids)
        if self.uses_interference:
            # Residents per GPU slot as the call starts, and the row versions they hold for.
            hints.tenant_counts = (self.tenant_count[ids, :width], taken.version.copy())
        decision = schedule(
            snapshot, requests, self.built, data=data, arrays=taken, explain=False, annotate=False
        )
        by_job: dict[str, list[Placement]] = {}
        for p in decision.placements:
            by_job.setdefault(p.job_id, []).append(p)
        placed_any = False
        refused_now: list[_Job] = []
        for job in offer:
            placed = by_job.get(job.trace.job_id)
            if placed:
                self._start(job, placed, now)
                placed_any = True
            else:
                failed.add(job.idx)
                self.failed_classes[self._class(job)] = self._epoch(job)
                if job.shared:
                    refused_now.append(job)
        if refused_now:
            # A shared job fails only when no idle GPU fits it (an idle GPU is always admissible), so
            # it met every GPU with room that is left after the call and was refused there: later
            # placements of the call only fill GPUs (an idle one would have taken it).
            kinds = self.slot_kinds()
            for job in refused_now:
                mem = job.request.tasks[0].gpu_memory_mib if job.request else 0
                milli = job.request.tasks[0].gpu_milli if job.request else 0
                self.refused.setdefault(self._class(job), set()).update(
                    k for k in kinds if k[2] >= milli and k[3] >= mem
                )
        return placed_any

    def _gang_counts_outside(self, ids: list[int]) -> tuple[int, dict[int, int]]:
        """What the nodes left out of a call's snapshot add to the balance term's gang reservation
        (``gang_reserved_sizes``): their free milli-GPU and, per GPU count, how many are empty (every
        GPU idle, no CPU in use). The snapshot keeps only as many identical nodes as the call has
        tasks, so without these the reservation would count a fraction of the empty nodes."""
        free_node = np.add.reduceat(self.free_milli, self.offsets[:-1])
        out = np.ones(len(self.nodes), dtype=bool)
        out[ids] = False
        extra_milli = int(free_node[out].sum())
        empty: dict[int, int] = {}
        for i in np.flatnonzero(out & (free_node == self.node_capacity)).tolist():
            if self.nodes[i].used_cpu_milli == 0 and self.node_gpus[i] > 0:
                size = int(self.node_gpus[i])
                empty[size] = empty.get(size, 0) + 1
        return extra_milli, empty

    def slot_kinds(self) -> dict[SlotKind, int]:
        """(node group, resident job types, free milli-GPU, free memory) of every GPU with room and
        residents -> count, in GPU order. What the feasibility of a shared task on that GPU depends on.

        Incremental: each GPU's kind is cached until a start or release touches it, and the whole
        answer until a shared job starts or ends (``gpu_moves``). The returned dict is shared: read only.
        """
        if self._kinds_at == self.gpu_moves:
            return self._kinds_cache
        out: dict[SlotKind, int] = {}
        kinds = self.gpu_kind
        for gid in np.flatnonzero((self.free_milli > 0) & (self.free_milli < GPU_MILLI)).tolist():
            k = kinds[gid]
            if k is None:
                k = kinds[gid] = (
                    self.node_group[int(self.gpu_node[gid])],
                    tuple(sorted(self.jobs[j].type_idx for j in self.tenants[gid])),
                    int(self.free_milli[gid]),
                    int(self.free_mem[gid]),
                )
            out[k] = out.get(k, 0) + 1
        self._kinds_cache = out
        self._kinds_at = self.gpu_moves
        return out

    def _epoch(self, job: _Job) -> tuple[int, int]:
        """The releases that could make this job placeable: whole GPUs need a GPU to become idle,
        a shared task also a GPU with room next to a resident."""
        return (self.idle_epoch, self.slot_epoch if job.shared else 0)

    @staticmethod
    def _class(job: _Job) -> tuple[object, ...]:
        """What schedule()'s feasibility depends on for this job (see ``failed_classes``)."""
        return (job.shape, job.type_idx if job.shared else -1, tuple(sorted(job.avoid)))

    def _target_workload(self) -> TargetWorkload:
        """FGD's target workload M: the task shapes of every job arrived so far (what an online
        scheduler knows), rebuilt when arrivals grew by 10 % or 2,000 tasks since the last build."""
        grown = self.arrived_tasks - self._workload_at
        if self._workload is None or (grown > 0 and (grown >= 2000 or grown >= 0.1 * self._workload_at)):
            version = self._workload.version + 1 if self._workload else 1
            self._workload = TargetWorkload.from_counts(self.shape_counts)
            self._workload.version = version
            self._workload_at = self.arrived_tasks
        return self._workload

    def _candidate_nodes(self, tasks: int) -> tuple[list[Node], list[Placement], list[int]]:
        """Nodes worth offering, in cluster order, and the placements running on them.

        A node without free GPU capacity passes no filter, so it is left out. Nodes of one group (same
        hardware) in the same state (per-GPU milli-GPU and memory in use, the job types sharing each
        partly used GPU, CPU and memory in use) are interchangeable: every plugin scores them alike
        and ties go to the first. One cycle places at most ``tasks`` tasks, so only the first
        ``tasks`` nodes of each such class are offered; the decision is the one the whole cluster
        would give.
        """
        free_per_node = np.add.reduceat(self.free_milli, self.offsets[:-1])
        ids = np.flatnonzero(free_per_node > 0)
        sig = self.sig_id
        for i in ids[sig[ids] < 0].tolist():
            # Interned: equal signatures get one small id (hashed here once per node change).
            interned = self._sig_ids
            sig[i] = interned.setdefault(self._signature(i), len(interned))
        group = sig[ids]
        if tasks == 1:
            first = np.unique(group, return_index=True)[1]
            chosen = ids[np.sort(first)]
        else:
            # The first ``tasks`` nodes of each signature, in cluster order.
            order = np.argsort(group, kind="stable")
            grouped = group[order]
            starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
            rank = np.arange(order.size) - np.repeat(starts, np.diff(np.r_[starts, order.size]))
            chosen = ids[np.sort(order[rank < tasks])]
        offered: list[int] = chosen.tolist()
        nodes = [self.nodes[i] for i in offered]
        running: list[Placement] = []
        node_running = self.node_running
        for i in offered:
            running.extend(node_running[i].values())
        return nodes, running, offered

    def _signature(self, i: int) -> tuple[object, ...]:
        node = self.nodes[i]
        gpus = tuple(
            (g.used_milli, g.used_memory_mib, tuple(sorted(self.jobs[j].type_idx for j in self.tenants[gid])))
            if 0 < g.used_milli < GPU_MILLI
            else (g.used_milli, g.used_memory_mib)
            for gid, g in enumerate(node.gpus, start=self.offsets[i])
        )
        return (self.node_group[i], node.used_cpu_milli, node.used_memory_mib, gpus)

    def _verdict_key(self, i: int) -> tuple[tuple[object, ...], list[int]]:
        """What ``sim_interference``'s verdicts on node ``i`` depend on besides the newcomer, and the
        slot class of each of its GPUs.

        The node key: the hardware (group: GPU model and memory) and, per GPU, the milli-GPU and
        memory in use and, on a partly used GPU, its residents' (job type, request shape): a
        resident's profile, share and tolerance follow from those. A slot class (an id, -1 for a GPU
        without residents or without room) stands for (group, residents' sorted (type, shape)):
        what the verdict on one GPU depends on besides the newcomer (whether the newcomer fits is
        the GPU's free capacity, which the placement engine's arrays hold). Both hold across calls.
        """
        node = self.nodes[i]
        jobs = self.jobs
        group = self.node_group[i]
        gpus: list[tuple[object, ...]] = []
        classes: list[int] = []
        ids = self._slot_ids
        for gid, g in enumerate(node.gpus, start=self.offsets[i]):
            if 0 < g.used_milli < GPU_MILLI:
                residents = tuple(sorted((jobs[j].type_idx, jobs[j].shape) for j in self.tenants[gid]))
                gpus.append((g.used_milli, g.used_memory_mib, residents))
                cls = (group, residents)
                c = ids.get(cls)
                if c is None:
                    c = ids[cls] = len(ids)
                classes.append(c)
            else:
                gpus.append((g.used_milli, g.used_memory_mib))
                classes.append(-1)
        return (group, tuple(gpus)), classes

    # ------------------------------------------------------------------ state changes
    def _advance(self, job: _Job, now: float) -> None:
        job.remaining -= job.rate * (now - job.last)
        job.last = now

    def _set_rate(self, job: _Job, rate: float, now: float) -> None:
        self._advance(job, now)
        # Useful GPUs = sum of num_gpus * rate: a GPU with two tenants at 0.7 each does 1.4 GPUs of work.
        self.useful += job.trace.num_gpus * (rate - job.rate)
        job.rate = rate
        job.version += 1
        if rate * self.cfg.slowdown_tolerance < 1.0 - 1e-9 and not job.violated:
            job.violated = True
            self.violations += 1
        finish = now + max(job.remaining, 0.0) / rate
        heapq.heappush(self.heap, (finish, job.version, job.idx))

    def _shared_rate(self, job_idx: int, gid: int) -> float:
        me = self.jobs[job_idx].type_idx
        return self.perf.shared_rate(me, (self.jobs[o].type_idx for o in self.tenants[gid] if o != job_idx))

    def _refresh_gpu(self, gid: int, now: float, skip: int = -1) -> None:
        for o in self.tenants[gid]:
            if o != skip:
                self._set_rate(self.jobs[o], self._shared_rate(o, gid), now)

    def _start(self, job: _Job, placed: list[Placement], now: float) -> None:
        self._dequeue(job)
        job.state = RUNNING
        job.placements = placed
        job.gids = []
        job.violated = False
        job.last = now
        job.run_since = now
        self.since[job.idx] = now
        job.started_at = now
        job.rate = 0.0
        if job.first_start is None:
            job.first_start = now
        else:
            job.remaining += self.cfg.preempt_penalty_s
        nodes_used = set()
        if job.shared:  # only a shared task makes or leaves a partly used GPU (slot kinds)
            self.gpu_moves += 1
        for p in placed:
            ni = self.node_by_name[p.node]
            nodes_used.add(ni)
            self.sig_id[ni] = -1
            self.node_vkey[ni] = None
            self.node_classes[ni] = None
            self.node_clone[ni] = None
            reserve(self.nodes[ni], p)
            self.node_running[ni][p.task_id] = p
            self.task_profiles[p.task_id] = job.tenant_profile
            for gi in p.gpu_indices:
                gid = self.offsets[ni] + gi
                self.free_milli[gid] -= p.gpu_milli
                self.free_mem[gid] -= p.gpu_memory_mib
                self.alloc_milli += p.gpu_milli
                self.tenants[gid].append(job.idx)
                self.tenant_count[ni, gi] += 1
                self.gpu_kind[gid] = None
                job.gids.append(gid)
        self.running.add(job.idx)
        self.placements += 1
        if job.shared:
            gid = job.gids[0]
            if len(self.tenants[gid]) > 1:
                self.shared_gids.add(gid)
            self._set_rate(job, self._shared_rate(job.idx, gid), now)
            self._refresh_gpu(gid, now, skip=job.idx)
        else:
            if len(nodes_used) > 1:
                link: str | None = "NET"
            else:
                ni = next(iter(nodes_used))
                gpus = [gi for p in placed for gi in p.gpu_indices]
                links = self.links[ni]
                key = (id(links), tuple(gpus))  # (the link tables live as long as the run)
                link = self._bottleneck.get(key, "")
                if link == "":
                    link = self._bottleneck[key] = bottleneck_link(links, gpus)
            comm_fraction = self.perf.job_types[job.type_idx].comm_fraction
            ref = self._best_link(self.node_group[min(nodes_used)], job.trace.num_gpus)
            rate = comm_rate(comm_fraction, link) / comm_rate(comm_fraction, ref)
            self._set_rate(job, min(1.0, rate), now)

    def _best_link(self, group: int, num_gpus: int) -> str | None:
        key = (group, num_gpus)
        link = self._best_links.get(key, "")
        if link == "":
            g = self.spec.groups[group]
            link = self._best_links[key] = best_link(g.links, num_gpus, g.gpus)
        return link

    def _release(self, job: _Job, now: float) -> None:
        if not self.gpu_bound:
            self.idle_epoch += 1  # CPU or memory may bind: any release may unblock anyone
        self._advance(job, now)
        self.useful -= job.rate * job.trace.num_gpus
        job.rate = 0.0
        job.version += 1
        job.attained += job.trace.num_gpus * (now - job.run_since)
        self.att[job.idx] = job.attained
        self.running.discard(job.idx)
        touched: list[int] = []
        if job.shared:
            self.gpu_moves += 1
        for p in job.placements:
            ni = self.node_by_name[p.node]
            self.sig_id[ni] = -1
            self.node_vkey[ni] = None
            self.node_classes[ni] = None
            self.node_clone[ni] = None
            unreserve(self.nodes[ni], p)
            del self.node_running[ni][p.task_id]
            self.task_profiles.pop(p.task_id, None)
            for gi in p.gpu_indices:
                gid = self.offsets[ni] + gi
                self.free_milli[gid] += p.gpu_milli
                self.free_mem[gid] += p.gpu_memory_mib
                self.alloc_milli -= p.gpu_milli
                self.tenants[gid].remove(job.idx)
                self.tenant_count[ni, gi] -= 1
                self.gpu_kind[gid] = None
                touched.append(gid)
                if self.free_milli[gid] == GPU_MILLI:
                    self.idle_epoch += 1
                else:
                    self.slot_epoch += 1
        job.placements = []
        job.gids = []
        if job.shared:
            for gid in touched:
                if len(self.tenants[gid]) < 2:
                    self.shared_gids.discard(gid)
                self._refresh_gpu(gid, now)

    def _finish(self, job: _Job, now: float) -> None:
        self._release(job, now)
        job.state = DONE
        job.finish = now
        job.remaining = 0.0
        # What an online scheduler learns: this job's service, now that it is done.
        self.priority.completed(job.trace.group, job.trace.num_gpus, job.attained)

    def _preempt(self, job: _Job, now: float) -> None:
        self._release(job, now)
        job.preemptions += 1
        self.preemptions += 1
        self._enqueue(job)

    # ------------------------------------------------------------------ rounds
    def _round_useful(self) -> bool:
        if (self.policy.preemptive or self.policy.defragment) and self.waiting and self.running:
            return True
        # Introspection (unpacking) matters whenever some GPU is shared, queue or not.
        return self.policy.introspective and bool(self.shared_gids)

    def _round(self, now: float) -> bool:
        """Preempt (2D-LAS) or unpack (Gandiva); True when capacity was freed."""
        freed = False
        if self.policy.introspective:
            for gid in sorted(self.shared_gids):
                ids = self.tenants[gid]
                newest = unpack_victim(
                    ids,
                    [self.jobs[i].rate for i in ids],
                    [self.jobs[i].started_at for i in ids],
                    self.policy.unpack_rule,
                    self.cfg.slowdown_tolerance,
                )
                if newest is not None:
                    victim = self.jobs[newest]
                    for other in ids:
                        if other != newest:
                            victim.avoid.add(self.jobs[other].type_idx)
                    self._preempt(victim, now)
                    freed = True
        if self.policy.preemptive and self.waiting:
            freed |= self._las_preempt(now)
        if self.policy.unpack_on_idle:
            freed |= self._unpack_on_idle(now)
        if self.policy.defragment and self.waiting:
            freed |= self._defragment(now)
        return freed

    def _idle_gpus(self) -> int:
        return int(np.count_nonzero(self.free_milli == GPU_MILLI))

    def _waiting_need(self, job: _Job) -> float:
        """Idle GPUs a waiting job needs: its whole GPUs, or one for a shared job (it waits after a
        cycle, so no co-location was admitted for it: it needs a GPU of its own)."""
        return 1.0 if job.shared else job.gpu_eq

    def _unpack_on_idle(self, now: float) -> bool:
        """Restart alone the tenants ``scheduler.policy.unpacking.unpack_on_idle`` picks (30 s
        restart cost); the next cycle places them on idle GPUs (idle-first admission)."""
        needs = (
            self._waiting_need(self.jobs[i])
            for i in itertools.islice(self._queue_in_order(), self.cfg.scan_limit)
        )
        spare = spare_gpus(self._idle_gpus(), needs)
        if not spare:
            return False
        jobs = self.jobs
        shared = (
            (self.tenants[gid], [jobs[t].started_at for t in self.tenants[gid]])
            for gid in sorted(self.shared_gids)
        )
        moved = unpack_on_idle(shared, spare)
        for idx in moved:
            self._preempt(jobs[idx], now)
            self.unpacks += 1
        return bool(moved)

    def _defragment(self, now: float) -> bool:
        """Drain nodes for the first blocked whole-GPU job of the window (``scheduler.policy.drain``):
        the moved jobs restart (the preemption penalty) and are placed by ``schedule()`` right after
        the waiting job, which is placed first (a one-job cycle) so the drained nodes go to it."""
        jobs = self.jobs
        fits = _FitCheck(self)
        idle_node = fits._idle()  # idle GPUs per node (read only: the plan works on a copy)
        budget = float(idle_node.sum())
        queue = itertools.islice(self._queue_in_order(), self.cfg.window)
        while True:
            waiting = ((idx, self._waiting_need(jobs[idx]), self._blocked(jobs[idx], fits)) for idx in queue)
            found = first_blocked(waiting, budget)
            if found is None:
                return False
            idx, budget = found
            job = jobs[idx]
            plan = drain_plan(
                job.sizes, idle_node, self.node_gpus, self._drain_units, lambda j: jobs[j].trace.num_gpus
            )
            if plan is not None:
                break
        for m in plan:
            self._release(jobs[m], now)
            self._enqueue(jobs[m])
            self.migrations += 1
        self._cycle(now, [job])
        self._cycle(now, [jobs[m] for m in plan])
        return True

    def _blocked(self, job: _Job, fits: _FitCheck) -> bool:
        return not job.shared and bool(job.sizes) and not fits(job)

    def _drain_units(self, ni: int) -> list[tuple[int, list[int]]]:
        """What frees GPUs on node ``ni`` (``scheduler.policy.drain``): a whole-GPU job on this node
        only frees its GPUs; a shared GPU frees when all of its tenants move. Jobs spanning nodes stay."""
        jobs = self.jobs
        units: list[tuple[int, list[int]]] = []
        seen: set[int] = set()
        for tid in self.node_running[ni]:
            j = self.task_owner[tid]
            if j in seen:
                continue
            seen.add(j)
            jb = jobs[j]
            if len(jb.placements) == 1 and not jb.shared:
                units.append((jb.trace.num_gpus, [j]))
        for gid in range(self.offsets[ni], self.offsets[ni + 1]):
            tenants = self.tenants[gid]
            if tenants and all(jobs[t].shared for t in tenants):
                units.append((1, sorted(tenants)))
        return units

    def _las_preempt(self, now: float) -> bool:
        """2D-LAS level preemption (``scheduler.policy.preemption.choose_victims``) over the window."""
        jobs = self.jobs
        best_pending_level = min(int(b[0][0][0]) for b in self.buckets.values() if b)
        thresholds = np.asarray(self.policy.las_thresholds)
        if best_pending_level >= len(thresholds) or not self.running:
            return False
        ids = np.fromiter(self.running, dtype=np.int64, count=len(self.running))
        attained = self.att[ids] + self.ngpus[ids] * (now - self.since[ids])
        levels_arr = np.searchsorted(thresholds, attained, side="right")
        mask = levels_arr > best_pending_level
        if not mask.any():
            return False
        levels = dict(zip(ids[mask].tolist(), levels_arr[mask].tolist(), strict=True))
        # Lowest priority first: highest level, then most recently started.
        victims = sorted(levels, key=lambda i: (-levels[i], -jobs[i].started_at, -i))
        tenants = self.tenants

        def frees(victim: int, chosen: set[int]) -> float:
            # A GPU becomes idle when all of its tenants are chosen.
            return float(sum(1 for g in jobs[victim].gids if all(t in chosen for t in tenants[g])))

        waiting = (
            (jobs[idx], self._waiting_need(jobs[idx]))
            for idx in itertools.islice(self._queue_in_order(), self.cfg.window)
        )
        # Free capacity in idle GPUs: what a waiting job can actually use. With whole GPUs only this
        # is the free milli-GPU sum; with shared GPUs a half-used GPU whose resident nobody may join
        # would otherwise count as free and block every preemption.
        chosen = choose_victims(
            waiting, victims, lambda job, v: levels[v] > int(job.key[0]), frees, float(self._idle_gpus())
        )
        for idx, _ in chosen:
            self._preempt(jobs[idx], now)
        return bool(chosen)


class _SimSnapshot(ClusterSnapshot):
    """The simulator's snapshot for one ``schedule()`` call, whose working copy reuses each node's
    copy from earlier calls while the node is unchanged (``Simulator.node_clone``).

    Sound because ``schedule()`` only changes its working copy through ``reserve`` and, for a job it
    cannot place whole, ``unreserve`` of what it reserved (which restores every field and the
    tenant order): after a call a copy differs from its node only where a placement was kept, and
    the simulator then starts that job on the node, which drops the copy.
    """

    clones: list[Node]

    def copy(self) -> ClusterSnapshot:
        return ClusterSnapshot(
            nodes=list(self.clones),
            running=list(self.running),
            now=self.now,
            task_profiles=self.task_profiles,
        )


class _ShapeCheck:
    """Accepts a request shape when its first job might fit and its demand is within the budget."""

    def __init__(self, fits: _FitCheck, budget: float) -> None:
        self.fits = fits
        self.budget = budget

    def __call__(self, job: _Job) -> bool:
        return job.gpu_eq <= self.budget + EPS and self.fits(job)


class _FitCheck:
    """Necessary condition for a job to fit the current free capacity (cached per request shape).

    Whole GPUs: the job's tasks need distinct nodes with that many idle GPUs each. A shared task: an
    idle GPU with its memory, or a GPU with room next to residents of a *slot kind* (node group,
    resident job types, free milli-GPU, free memory) that schedule() has not refused for the job's
    class before (``Simulator.refused``: feasibility depends only on the class and the kind, so a
    refusal holds for the rest of the run).
    """

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self._idle_per_node: np.ndarray | None = None
        self._cache: dict[tuple[object, ...], bool] = {}
        self._kinds: dict[SlotKind, int] | None = None

    def _idle(self) -> np.ndarray:
        if self._idle_per_node is None:
            idle = (self.sim.free_milli == GPU_MILLI).astype(np.int64)
            self._idle_per_node = np.add.reduceat(idle, self.sim.offsets[:-1])
        return self._idle_per_node

    def kinds(self) -> dict[SlotKind, int]:
        """Slot kinds of the GPUs with room and residents now -> how many GPUs."""
        if self._kinds is None:
            self._kinds = self.sim.slot_kinds()
        return self._kinds

    def __call__(self, job: _Job) -> bool:
        req = job.request
        assert req is not None
        sizes = job.sizes
        if sizes:
            ok = self._cache.get(sizes)  # (a tuple of ints: no clash with the shared keys below)
            if ok is None:
                idle = self._idle()
                # The i-th largest task needs its own node with that many idle GPUs.
                ok = all(int((idle >= g).sum()) > i for i, g in enumerate(sizes))
                self._cache[sizes] = ok
            if not ok:
                return False
        if not job.shared:
            return True  # only a shared job has a shared (milli-GPU) task
        for task in req.tasks:
            if task.gpus or not task.gpu_milli:
                continue
            key: tuple[object, ...] = ("shared", task.gpu_milli, task.gpu_memory_mib)
            idle_ok = self._cache.get(key)
            if idle_ok is None:
                free_m, free_mem = self.sim.free_milli, self.sim.free_mem
                idle_ok = bool(((free_m == GPU_MILLI) & (free_mem >= task.gpu_memory_mib)).any())
                self._cache[key] = idle_ok
            if idle_ok:
                continue
            refused = self.sim.refused.get(self.sim._class(job), set())
            if not any(
                k[2] >= task.gpu_milli and k[3] >= task.gpu_memory_mib and k not in refused
                for k in self.kinds()
            ):
                return False
        return True


class _Room:
    """Capacity left for the rest of a call's offer after the jobs already in it (one call).

    Whole-GPU tasks take idle GPUs of one node each (best fit: the node with the fewest idle GPUs
    that suffice). Under the *half* share rule a shared job takes one half-GPU slot: a GPU with room
    next to residents of a kind not refused for its class, else half of an idle GPU (the other half
    stays as a slot). It never holds back a job that the cluster could take on its own, only what
    earlier jobs of the same offer would take first; the real placement may differ, so a job it
    holds back is offered again by the next call. Other share rules are not modelled (no limit).
    """

    def __init__(self, sim: Simulator, fits: _FitCheck) -> None:
        self.sim = sim
        self.idle = fits._idle().copy()
        self.half = sim.policy.share == "half"
        self.fits = fits
        # Slot kinds (``fits.kinds()``), fetched when first needed and copied when first changed.
        self._kinds: dict[SlotKind, int] | None = None
        self._own_kinds = False
        self.spare_halves = 0  # second halves of idle GPUs taken by shared jobs
        # Room only shrinks during a call: what found none once finds none again (long queues).
        self._none: set[tuple[object, ...]] = set()

    @property
    def kinds(self) -> dict[SlotKind, int]:
        if self._kinds is None:
            self._kinds = self.fits.kinds() if self.half else {}
        return self._kinds

    def empty(self) -> bool:
        """Nothing left for anyone (the scan can stop)."""
        if self.sim.policy.share not in ("none", "half"):
            return False  # shared requests of other rules are not modelled: they may still fit
        return not self.idle.any() and not self.spare_halves and not any(self.kinds.values())

    def take(self, job: _Job) -> bool:
        req = job.request
        assert req is not None
        sizes = job.sizes
        if sizes:
            if sizes in self._none:
                return False
            if len(sizes) == 1:  # (one task: nothing to undo if it does not fit)
                g = sizes[0]
                ok = np.flatnonzero(self.idle >= g)
                if ok.size == 0:
                    self._none.add(sizes)
                    return False
                self.idle[int(ok[np.argmin(self.idle[ok])])] -= g
                return True
            idle = self.idle.copy()
            for g in sizes:
                ok = np.flatnonzero(idle >= g)
                if ok.size == 0:
                    self._none.add(sizes)
                    return False
                best = int(ok[np.argmin(idle[ok])])
                idle[best] -= g
            self.idle = idle
            return True
        if not (job.shared and self.half):
            return True
        cls = self.sim._class(job)
        if cls in self._none:
            return False
        task = req.tasks[0]
        refused = self.sim.refused.get(cls, set())
        kinds = self.kinds
        for k, count in kinds.items():
            if count > 0 and k[2] >= task.gpu_milli and k[3] >= task.gpu_memory_mib and k not in refused:
                if not self._own_kinds:  # the fit check's dict is shared: change a copy
                    self._kinds = kinds = dict(kinds)
                    self._own_kinds = True
                kinds[k] = count - 1
                return True
        if self.spare_halves > 0:
            self.spare_halves -= 1
            return True
        ok = np.flatnonzero(self.idle >= 1)
        if ok.size == 0:
            self._none.add(cls)
            return False
        self.idle[int(ok[np.argmin(self.idle[ok])])] -= 1
        self.spare_halves += 1
        return True

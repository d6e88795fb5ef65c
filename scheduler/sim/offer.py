"""Offers: which waiting jobs a scheduling cycle puts in front of ``schedule()``, and on which nodes.

None of this changes what ``schedule()`` decides for the jobs it is offered (see the engine's module
docstring): the fit check, the room left by earlier offers, the failure memo, the idle-node
reduction and the slot classes handed to the interference plugin (``SlotHints``)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.schedule import schedule
from scheduler.frag.fragmentation import TargetWorkload
from scheduler.framework import BuiltProfile
from scheduler.model import GPU_MILLI, ClusterSnapshot, Node, Placement
from scheduler.plugins.sim_interference import SlotHints
from scheduler.sim.records import EPS, PENDING, SlotKind, _Job
from scheduler.sim.state import SimState


class SimOffer(SimState):
    built: BuiltProfile
    arrays: ClusterArrays
    slot_class_mat: np.ndarray
    _slot_ids: dict[tuple[object, ...], int]
    _sig_ids: dict[tuple[object, ...], int]
    task_class: dict[str, Any]
    uses_interference: bool
    uses_gang_reservation: bool
    node_capacity: np.ndarray
    gpu_node: np.ndarray
    shape_counts: Any
    arrived_tasks: int
    _workload: TargetWorkload | None
    _workload_at: int
    _kinds_at: int
    _kinds_cache: dict[SlotKind, int]
    failed_classes: dict[tuple[object, ...], tuple[int, int]]
    refused: dict[tuple[object, ...], set[SlotKind]]
    room_memo: dict[tuple[object, ...], tuple[int, int, bool]]
    skipped_offers: int
    deferred_offers: int
    schedule_calls: int

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
            # Other jobs (shared, or with avoidances) cannot retire their shape, whose list mixes
            # classes, but the fit check, the failure memo and a refused room are functions of the
            # job's class during a call, and the last two only tighten: the first job of a class
            # that fails one records it, and the rest of the class repeats that outcome (and its
            # counters) without asking again. ``room.empty()`` only changes when a job takes room.
            refused_in_scan: dict[tuple[object, ...], int] = {}
            taken = 0
            empty_asked_at = -1
            for job in source:
                if len(offer) >= self.cfg.window or demand >= budget - EPS:
                    break
                # Whole-GPU jobs of one shape are alike for every test below (budget, fit, failure
                # memo, room), and all only tighten during a call: one that fails retires its shape
                # for the rest of the scan (a long queue is not walked job by job).
                whole = not job.shared and not job.avoid
                if job.idx in failed or job.gpu_eq > budget - demand + EPS:
                    if whole and job.idx not in failed:
                        dead.add(job.shape)
                    continue
                cls = self._class(job)
                seen = refused_in_scan.get(cls) if not whole else None
                if seen is None:
                    if not fits(job):
                        if whole:
                            dead.add(job.shape)
                        else:
                            refused_in_scan[cls] = _UNFIT
                        continue
                    if self.failed_classes.get(cls) == self._epoch(job):
                        seen = _FAILED
                    elif room.take(job):
                        taken += 1
                        offer.append(job)
                        demand += job.gpu_eq
                        continue
                    else:
                        seen = _NO_ROOM
                    if not whole:
                        refused_in_scan[cls] = seen
                if seen == _UNFIT:
                    continue
                if seen == _FAILED:
                    # Same class failed since the last release: schedule() would refuse it again.
                    failed.add(job.idx)
                    self.skipped_offers += 1
                    if whole:
                        dead.add(job.shape)
                    continue
                # What the jobs offered before it take leaves it no room: it waits for the next call
                # (not marked failed), which sees where they really went.
                self.deferred_offers += 1
                if empty_asked_at != taken:
                    if room.empty():
                        break
                    empty_asked_at = taken
                if whole:
                    dead.add(job.shape)
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
        # Asked for every job the scan walks: kept on the job until ``avoid`` grows.
        if job.class_at != len(job.avoid):
            job.class_key = (job.shape, job.type_idx if job.shared else -1, tuple(sorted(job.avoid)))
            job.class_at = len(job.avoid)
        return job.class_key

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

    def _idle_gpus(self) -> int:
        return int(np.count_nonzero(self.free_milli == GPU_MILLI))


# What the first job of a class met in one call's scan (``SimOffer._cycle``): no fit, the failure
# memo, or no room left by the jobs offered before it.
_UNFIT, _FAILED, _NO_ROOM = 1, 2, 3


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

    def __init__(self, sim: SimOffer) -> None:
        self.sim = sim
        self._idle_per_node: np.ndarray | None = None
        self._idle_mem: int | None = None
        self._cache: dict[tuple[object, ...], bool] = {}
        self._kinds: dict[SlotKind, int] | None = None
        self._moves = -1
        # A shared job's answer, per class: every input below is fixed for the check's one call
        # (the scan asks it for each shape's first job and for every job it walks).
        self._by_class: dict[tuple[object, ...], bool] = {}

    def _idle(self) -> np.ndarray:
        if self._idle_per_node is None:
            idle = (self.sim.free_milli == GPU_MILLI).astype(np.int64)
            self._idle_per_node = np.add.reduceat(idle, self.sim.offsets[:-1])
        return self._idle_per_node

    def _idle_memory(self) -> int:
        """The most free GPU memory of any idle GPU (-1: none idle). A shared task fits an idle GPU
        iff it asks at most this much: one reduction per call instead of one per request shape (a
        scan asks every shape's first job)."""
        if self._idle_mem is None:
            mem = self.sim.free_mem[self.sim.free_milli == GPU_MILLI]
            self._idle_mem = int(mem.max()) if mem.size else -1
        return self._idle_mem

    def kinds(self) -> dict[SlotKind, int]:
        """Slot kinds of the GPUs with room and residents now -> how many GPUs."""
        if self._kinds is None:
            self._kinds = self.sim.slot_kinds()
            self._moves = self.sim.gpu_moves  # the version of the kinds fetched
        return self._kinds

    def __call__(self, job: _Job) -> bool:
        if not job.shared:
            return self._fits(job)
        cls = self.sim._class(job)
        ok = self._by_class.get(cls)
        if ok is None:
            ok = self._by_class[cls] = self._fits(job)
        return ok

    def _fits(self, job: _Job) -> bool:
        req = job.request
        assert req is not None
        sizes = job.sizes
        if sizes:
            ok = self._cache.get(sizes)
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
            if task.gpu_memory_mib <= self._idle_memory():
                continue  # an idle GPU with the memory it asks
            # The answer depends only on the class, the request, the slot kinds (fixed while
            # ``gpu_moves`` is) and the class's refusals (a set that only grows): kept across calls
            # and cycles under that stamp, so the kinds are not walked again for every shape's head.
            cls = self.sim._class(job)
            refused = self.sim.refused.get(cls, set())
            kinds = self.kinds()
            room_key = (cls, task.gpu_milli, task.gpu_memory_mib)
            stamp = (self._moves, len(refused))
            hit = self.sim.room_memo.get(room_key)
            if hit is not None and hit[:2] == stamp:
                room = hit[2]
            else:
                room = any(
                    k[2] >= task.gpu_milli and k[3] >= task.gpu_memory_mib and k not in refused for k in kinds
                )
                self.sim.room_memo[room_key] = (*stamp, room)
            if not room:
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

    def __init__(self, sim: SimOffer, fits: _FitCheck) -> None:
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

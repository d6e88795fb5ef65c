"""``plan_cycle(view, policy) -> Decision``: one scheduling cycle of a named policy over a view.

The steps, in order (each an extension point of its own module):

1. **packing** (``scheduler.policy.packing``): a 1-GPU job that allows sharing is offered as a share
   under the policy's share rule (``half``: half a GPU with its memory);
2. **queue sort** (``scheduler.policy.queue_sort``): priority first, then the policy's order;
3. when ``view.rounds`` (the periodic rules, once per round as in the simulator):
   - **unpacking** (``scheduler.policy.unpacking``): co-located jobs measured beyond tolerance, rule
     ``unpack``;
   - **preemption** (``scheduler.policy.preemption``): rules ``priority`` and (preemptive policies)
     ``las``;
   - **unpack on idle**: rule ``unpack-idle``;
   - **drain** (``scheduler.policy.drain``): ``Migration`` records, rule ``drain``;
4. **placement** by the policy's profile (``scheduler.framework.schedule``) on the cluster *as the
   evictions and migrations leave it*: the drain's target first, then the moved jobs (their
   ``Migration.to``), then the queue in order.

Semantics of an eviction: ``plan_cycle`` applies it to its working copy of the cluster at once, so
the preemptor is placed on what its victims free, in the same Decision. The platform preempts
asynchronously (SIGTERM, a grace period, then the next run): it persists an eviction at once and
holds a placement that uses GPUs a victim still holds until that victim's tasks stop (the job waits
first in the queue with "waiting for preempted job X to stop"); the simulator applies evictions at
once and then places. A victim is not placed again in the cycle that evicts it.

Never evicted or moved: a job with ``preemptible=False``, or whose current run is younger than its
``min_runtime_s``. A gang is evicted whole (an Eviction names the job).

Invariants (checked by the scenario tests): no GPU is oversubscribed by the placements on the
cluster after the evictions; every eviction names a rule and a preemptor (its waiting job; for
unpacking, the job itself).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from scheduler.framework import Profile, reserve, schedule, unreserve
from scheduler.model import ClusterSnapshot, Decision, Eviction, JobRequest, Migration, Placement
from scheduler.plugins.sim_interference import InterferenceMemo
from scheduler.policy.drain import drain_plan, first_blocked
from scheduler.policy.packing import share_request
from scheduler.policy.preemption import choose_victims, may_evict
from scheduler.policy.queue_sort import describe, job_gpus, job_key, las_level
from scheduler.policy.registry import Policy, get_policy, with_memo
from scheduler.policy.unpacking import spare_gpus, unpack_on_idle, unpack_victim
from scheduler.policy.view import PolicyView, RunningJob

# Waiting jobs the periodic rules look at (the simulator's ``SimConfig.window``).
WINDOW = 64


@dataclass
class _Cluster:
    """The working copy of the cluster: nodes with their usage, and who holds which GPU."""

    snapshot: ClusterSnapshot
    running: dict[str, RunningJob]
    gone: set[str] = field(default_factory=set)

    @property
    def nodes(self) -> dict[str, int]:
        return {n.name: i for i, n in enumerate(self.snapshot.nodes)}

    def idle_per_node(self) -> np.ndarray:
        return np.array(
            [
                sum(1 for g in n.gpus if g.used_milli == 0) if n.schedulable else 0
                for n in self.snapshot.nodes
            ],
            dtype=np.int64,
        )

    def idle(self) -> int:
        return int(self.idle_per_node().sum())

    def holders(self) -> dict[tuple[str, int], list[str]]:
        """(node, GPU index) -> ids of the running jobs on it (not yet evicted), in start order."""
        out: dict[tuple[str, int], list[str]] = defaultdict(list)
        for job in sorted(self.running.values(), key=lambda r: (r.started_at, r.job_id)):
            if job.job_id in self.gone:
                continue
            for p in job.placements:
                for gi in p.gpu_indices:
                    if job.job_id not in out[(p.node, gi)]:
                        out[(p.node, gi)].append(job.job_id)
        return out

    def remove(self, job_id: str) -> None:
        """Free a running job's GPUs (all of its tasks: a gang goes whole)."""
        if job_id in self.gone:
            return
        self.gone.add(job_id)
        nodes = self.nodes
        for p in self.running[job_id].placements:
            if p.node in nodes:
                unreserve(self.snapshot.nodes[nodes[p.node]], p)
        self.snapshot.running = [p for p in self.snapshot.running if p.job_id != job_id]

    def add(self, placements: list[Placement]) -> None:
        nodes = self.nodes
        for p in placements:
            reserve(self.snapshot.nodes[nodes[p.node]], p)
            self.snapshot.running.append(p)

    def fits_whole(self, sizes: tuple[int, ...]) -> bool:
        """The i-th largest task has its own node with that many idle GPUs."""
        idle = self.idle_per_node()
        return all(int((idle >= g).sum()) > i for i, g in enumerate(sizes))


Evictable = Callable[[RunningJob], bool]
Evict = Callable[[str, str, str, str], None]


def _policy(policy: object) -> Policy:
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, str):
        return get_policy(policy)
    raise TypeError(
        f"plan_cycle needs a scheduler.policy.Policy or a policy name, not {type(policy).__name__}"
    )


def _need(request: JobRequest) -> float:
    """Idle GPUs a waiting job needs: its whole GPUs, or one for a shared job (a GPU of its own)."""
    whole = sum(t.gpus for t in request.tasks)
    return float(whole) if whole else float(sum(1 for t in request.tasks if t.gpu_milli))


def _sizes(request: JobRequest) -> tuple[int, ...]:
    return tuple(sorted((t.gpus for t in request.tasks if t.gpus), reverse=True))


def _shared(job: RunningJob) -> bool:
    return job.shared


def plan_cycle(view: PolicyView, policy: object) -> Decision:
    """One cycle of ``policy`` (a ``Policy`` or its name) over ``view``; see the module docstring."""
    pol = _policy(policy)
    snap = view.snapshot.copy()
    gpu_memory = [g.memory_mib for n in snap.nodes for g in n.gpus if g.memory_mib]
    min_memory = min(gpu_memory) if gpu_memory else 0
    queue = [share_request(pol.share, r, min_memory) for r in view.queue]
    running = {r.job_id: r for r in view.running}
    # Fair share: the team's share of the cluster's GPUs held now.
    total = max(1, sum(len(n.gpus) for n in snap.nodes))
    held: dict[str, float] = defaultdict(float)
    for r in view.running:
        held[r.request.team] += r.gpus
    keys = {
        r.job_id: job_key(
            pol.order,
            r,
            thresholds=pol.las_thresholds,
            inner=pol.las_inner,
            history=view.history,
            team_share=held[r.team] / total,
        )
        for r in queue
    }
    queue.sort(key=lambda r: keys[r.job_id])
    cluster = _Cluster(snap, running)
    evictions: list[Eviction] = []
    migrations: list[tuple[RunningJob, str]] = []
    drain_target: JobRequest | None = None
    now = view.now

    def evictable(job: RunningJob) -> bool:
        return job.job_id not in cluster.gone and may_evict(
            job.request.preemptible, job.started_at, job.request.min_runtime_s, now
        )

    def evict(job_id: str, rule: str, preemptor: str, reason: str) -> None:
        cluster.remove(job_id)
        evictions.append(Eviction(job_id=job_id, rule=rule, preemptor=preemptor, reason=reason))

    if view.rounds:
        if pol.introspective:
            _unpack(pol, cluster, evictable, evict)
        _preempt(pol, cluster, queue, evictable, evict, now)
        if pol.unpack_on_idle:
            _unpack_idle(cluster, queue, evictable, evict)
        if pol.defragment:
            found = _drain(cluster, queue, evictable)
            if found is not None:
                drain_target, movers = found
                for job in movers:
                    cluster.remove(job.job_id)
                    migrations.append((job, drain_target.job_id))

    profile: Profile = pol.profile
    if isinstance(view.memo, InterferenceMemo):
        profile = with_memo(profile, view.memo)
    built = profile.build()
    placements: list[Placement] = []
    unschedulable: dict[str, str] = {}
    out_migrations: list[Migration] = []
    rest = [r for r in queue if drain_target is None or r.job_id != drain_target.job_id]
    if drain_target is not None:
        got = schedule(cluster.snapshot, [drain_target], built)
        cluster.add(got.placements)
        placements += got.placements
        unschedulable.update(got.unschedulable)
        movers_req = [share_request(pol.share, job.request, min_memory) for job, _ in migrations]
        moved = schedule(cluster.snapshot, movers_req, built)
        cluster.add(moved.placements)
        for job, target in migrations:
            to = tuple(moved.placements_for(job.job_id))
            nodes = tuple(dict.fromkeys(p.node for p in job.placements))
            out_migrations.append(
                Migration(
                    job_id=job.job_id,
                    from_nodes=nodes,
                    rule="drain",
                    preemptor=target,
                    reason=f"drain: moved so that waiting job {target} fits on whole nodes",
                    to=to,
                )
            )
    main = schedule(cluster.snapshot, rest, built)
    placements += main.placements
    unschedulable.update(main.unschedulable)
    placed = {p.job_id for p in placements}
    waiting = [r.job_id for r in queue if r.job_id not in placed]
    return Decision(
        placements=placements,
        unschedulable={j: unschedulable.get(j, "waiting for resources") for j in waiting},
        evictions=evictions,
        migrations=out_migrations,
        positions={job_id: i + 1 for i, job_id in enumerate(waiting)},
        queue_order=describe(pol.order, pol.las_thresholds, pol.las_inner),
    )


def _unpack(pol: Policy, cluster: _Cluster, evictable: Evictable, evict: Evict) -> None:
    """Unpack shared GPUs whose measured rates say packing loses (rule ``unpack``)."""
    for (node, gi), ids in sorted(cluster.holders().items()):
        jobs = [cluster.running[i] for i in ids]
        if len(jobs) < 2 or not all(_shared(j) for j in jobs) or any(j.rate is None for j in jobs):
            continue
        rates = [float(j.rate or 0.0) for j in jobs]
        tolerances = [j.request.slowdown_tolerance for j in jobs]
        victim = unpack_victim(ids, rates, [j.started_at for j in jobs], pol.unpack_rule, tolerances)
        if victim is None or not evictable(cluster.running[victim]):
            continue
        shown = ", ".join(f"{i} at {r:.2f}" for i, r in zip(ids, rates, strict=True))
        evict(
            victim, "unpack", victim, f"unpack: GPU {gi} of {node} measured {shown} (rule {pol.unpack_rule})"
        )


def _preempt(
    pol: Policy,
    cluster: _Cluster,
    queue: list[JobRequest],
    evictable: Evictable,
    evict: Evict,
    now: float,
) -> None:
    """Priority and LAS-level preemption (``scheduler.policy.preemption.choose_victims``)."""
    if not queue:
        return
    thresholds = pol.las_thresholds

    def level(attained: float) -> int:
        return las_level(thresholds, attained)

    cands = [r for r in cluster.running.values() if evictable(r)]
    lv = {r.job_id: level(r.attained_at(now)) for r in cands}
    # Lowest priority first: lowest priority class, highest level, then most recently started.
    cands.sort(key=lambda r: (r.request.priority, -lv[r.job_id], -r.started_at, r.job_id), reverse=False)
    holders = cluster.holders()
    gpus_of = {r.job_id: [(p.node, gi) for p in r.placements for gi in p.gpu_indices] for r in cands}

    def outranks(job: JobRequest, victim_id: str) -> bool:
        victim = cluster.running[victim_id]
        if job.priority != victim.request.priority:
            return job.priority > victim.request.priority
        return pol.preemptive and lv[victim_id] > level(job.attained_gpu_s)

    def frees(victim_id: str, chosen: set[str]) -> float:
        return float(sum(1 for k in set(gpus_of[victim_id]) if all(h in chosen for h in holders[k])))

    waiting = ((r, _need(r)) for r in queue[:WINDOW])
    chosen = choose_victims(waiting, [r.job_id for r in cands], outranks, frees, float(cluster.idle()))
    for victim_id, job in chosen:
        victim = cluster.running[victim_id]
        if job.priority > victim.request.priority:
            rule = "priority"
            why = (
                f"priority: waiting job {job.job_id} (priority {job.priority}) outranks priority "
                f"{victim.request.priority}"
            )
        else:
            rule = "las"
            why = (
                f"las: waiting job {job.job_id} at level {level(job.attained_gpu_s)} outranks level "
                f"{lv[victim.job_id]} ({victim.attained_at(now) / 3600:.2f} GPU-h attained)"
            )
        evict(victim.job_id, rule, job.job_id, why)


def _unpack_idle(cluster: _Cluster, queue: list[JobRequest], evictable: Evictable, evict: Evict) -> None:
    spare = spare_gpus(cluster.idle(), (_need(r) for r in queue))
    if not spare:
        return
    shared = []
    for (_node, _gi), ids in sorted(cluster.holders().items()):
        jobs = [cluster.running[i] for i in ids]
        if len(jobs) >= 2 and all(_shared(j) for j in jobs):
            # Only a tenant that may be moved is a candidate.
            pairs = [(j.job_id, j.started_at) for j in jobs]
            newest = max(pairs, key=lambda p: (p[1], p[0]))[0]
            if evictable(cluster.running[newest]):
                shared.append(([p[0] for p in pairs], [p[1] for p in pairs]))
    for job_id in unpack_on_idle(shared, spare):
        evict(job_id, "unpack-idle", job_id, "unpack-idle: idle GPUs are left over, so it restarts alone")


def _drain(
    cluster: _Cluster, queue: list[JobRequest], evictable: Evictable
) -> tuple[JobRequest, list[RunningJob]] | None:
    """The first blocked whole-GPU job of the window and the jobs to move for it, or None."""
    names = [n.name for n in cluster.snapshot.nodes]
    idle_node = cluster.idle_per_node()
    node_gpus = np.array(
        [len(n.gpus) if n.schedulable else 0 for n in cluster.snapshot.nodes], dtype=np.int64
    )
    holders = cluster.holders()
    live = {j: r for j, r in cluster.running.items() if j not in cluster.gone}

    def units_of(ni: int) -> list[tuple[int, list[str]]]:
        node = names[ni]
        units: list[tuple[int, list[str]]] = []
        for j, r in sorted(live.items()):
            if len(r.placements) == 1 and r.placements[0].node == node and not _shared(r) and evictable(r):
                units.append((job_gpus(r.request), [j]))
        for gi in range(len(cluster.snapshot.nodes[ni].gpus)):
            ids = holders.get((node, gi), [])
            if ids and all(_shared(live[i]) and evictable(live[i]) for i in ids):
                units.append((1, sorted(ids)))
        return units

    def waiting() -> Iterator[tuple[JobRequest, float, bool]]:
        for r in queue[:WINDOW]:
            sizes = _sizes(r)
            yield (
                r,
                _need(r),
                bool(sizes)
                and not any(t.gpu_milli and not t.gpus for t in r.tasks)
                and not cluster.fits_whole(sizes),
            )

    it = waiting()
    budget = float(idle_node.sum())
    while True:
        found = first_blocked(it, budget)
        if found is None:
            return None
        job, budget = found
        plan = drain_plan(_sizes(job), idle_node, node_gpus, units_of, lambda j: job_gpus(live[j].request))
        if plan is not None:
            return job, [live[j] for j in plan]

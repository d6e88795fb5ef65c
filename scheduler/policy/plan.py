"""``plan_cycle(view, policy) -> Decision``: one scheduling cycle of a named policy over a view.

The steps, in order (each an extension point of its own module):

1. **packing** (``scheduler.policy.packing``): a 1-GPU job that allows sharing is offered as a share
   under the policy's share rule (``half``: half a GPU with its memory);
2. **queue sort** (``scheduler.policy.queue_sort``): priority first, then the policy's order;
2b. with team quotas (``view.quotas``): the cohort's gate (``scheduler.policy.cohort.gate``: jobs over
   a limit wait with the reason, nominal jobs go first, borrowers in fair-share order), reclaim
   (``scheduler.policy.reclaim``; the jobs it evicted for are then placed first, on what their
   victims free) and priority classes inside a team (``scheduler.policy.team_priority``), every
   cycle;
3. when ``view.rounds``: the periodic rules, ``scheduler.policy.round.run_round`` (the one round
   the simulator runs too, over its own state): unpacking (rule ``unpack``), preemption (``priority``
   and, preemptive policies, ``las``), unpack on idle (``unpack-idle``) and the drain (``Migration``
   records, rule ``drain``), over ``_ClusterRound``, the round's view of the working copy below;
4. **placement** by the policy's profile (``scheduler.engine.schedule``) on the cluster *as the
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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler.engine.schedule import schedule
from scheduler.framework import Profile
from scheduler.model import (
    ClusterSnapshot,
    Decision,
    Eviction,
    JobRequest,
    Migration,
    Placement,
    reserve,
    unreserve,
)
from scheduler.plugins.sim_interference import InterferenceMemo
from scheduler.policy.cohort import Gate, gate, request_milli
from scheduler.policy.packing import share_request
from scheduler.policy.queue_sort import describe, job_gpus, job_key
from scheduler.policy.reclaim import run_reclaim
from scheduler.policy.registry import Policy, get_policy, with_memo
from scheduler.policy.round import Candidates, Running, Waiting, run_round
from scheduler.policy.team_priority import run_team_priority
from scheduler.policy.view import PolicyView, RunningJob


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


def _policy(policy: object) -> Policy:
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, str):
        return get_policy(policy)
    raise TypeError(
        f"plan_cycle needs a scheduler.policy.Policy or a policy name, not {type(policy).__name__}"
    )


class _ClusterRound:
    """``scheduler.policy.round.RoundState`` over the working copy: a running job is its id, a GPU
    ``(node, index)``, a waiting job its id; evictions and migrations free GPUs at once."""

    def __init__(self, cluster: _Cluster, queue: list[JobRequest], *, by_team: bool = False) -> None:
        self.cluster = cluster
        self.queue = queue
        # With team quotas the priority and LAS rules preempt only within a team.
        self.by_team = by_team
        self.requests = {r.job_id: r for r in queue}
        self.evictions: list[Eviction] = []
        self.migrations: list[tuple[RunningJob, str]] = []
        self.drain_target: JobRequest | None = None
        self.migration_reason = ""
        # Submit order of the running jobs (ties of the start time: the later submitted is newer).
        ranked = sorted(cluster.running.values(), key=lambda r: (r.request.submitted_at, r.job_id))
        self.order = {r.job_id: i for i, r in enumerate(ranked)}
        self._holders: dict[tuple[str, int], list[str]] | None = None

    def _live(self) -> list[RunningJob]:
        return [r for r in self.cluster.running.values() if r.job_id not in self.cluster.gone]

    def _gpu_holders(self) -> dict[tuple[str, int], list[str]]:
        if self._holders is None:
            self._holders = self.cluster.holders()
        return self._holders

    def idle_gpus(self) -> int:
        return self.cluster.idle()

    def idle_per_node(self) -> np.ndarray:
        return self.cluster.idle_per_node()

    def node_gpus(self) -> np.ndarray:
        return np.array(
            [len(n.gpus) if n.schedulable else 0 for n in self.cluster.snapshot.nodes], dtype=np.int64
        )

    def waiting(self) -> Iterator[Waiting[str]]:
        return (Waiting(r.job_id, r, r.attained_gpu_s) for r in self.queue)

    def candidates(self, now: float) -> Candidates[str]:
        live = self._live()
        return Candidates(
            [r.job_id for r in live],
            np.array([r.attained_at(now) for r in live], dtype=float),
            np.array([r.request.priority for r in live], dtype=np.int64),
            np.array([r.started_at for r in live], dtype=float),
            np.array([self.order[r.job_id] for r in live], dtype=np.int64),
            np.array([r.request.preemptible for r in live], dtype=bool),
            np.array([r.request.min_runtime_s for r in live], dtype=float),
        )

    def running(self, job: str) -> Running[str]:
        r = self.cluster.running[job]
        req = r.request
        return Running(
            job, job, req.priority, r.started_at, self.order[job], req.preemptible, req.min_runtime_s,
            r.shared, job_gpus(req), len(r.placements), r.rate, req.slowdown_tolerance,
        )  # fmt: skip

    def shared_gpus(self) -> list[tuple[tuple[str, int], Sequence[str]]]:
        nodes = self.cluster.nodes
        held = self._gpu_holders()
        gpus = sorted((k for k, ids in held.items() if len(ids) >= 2), key=lambda k: (nodes[k[0]], k[1]))
        return [(k, list(held[k])) for k in gpus]

    def may_preempt(self, waiting: str, victim: str) -> bool:
        """Whether waiting job ``waiting`` may evict running job ``victim`` by rank (its own team's
        only, with team quotas; across teams only reclaim evicts)."""
        return not self.by_team or self.requests[waiting].team == self.cluster.running[victim].request.team

    def gpu_label(self, gpu: tuple[str, int]) -> str:
        return f"GPU {gpu[1]} of {gpu[0]}"

    def holders(self, job: str) -> list[Sequence[str]]:
        held = self._gpu_holders()
        keys = dict.fromkeys(
            (p.node, gi) for p in self.cluster.running[job].placements for gi in p.gpu_indices
        )
        return [held.get(k, []) for k in keys]

    def jobs_on_node(self, node: int) -> Iterable[str]:
        name = self.cluster.snapshot.nodes[node].name
        return sorted(r.job_id for r in self._live() if any(p.node == name for p in r.placements))

    def node_tenants(self, node: int) -> list[Sequence[str]]:
        n = self.cluster.snapshot.nodes[node]
        held = self._gpu_holders()
        return [held.get((n.name, gi), []) for gi in range(len(n.gpus))]

    def evict(self, job: str, rule: str, preemptor: str, reason: str, avoid: Sequence[str]) -> None:
        # ``avoid`` (unpacking's learnt co-tenants) has no platform counterpart yet: the next cycle
        # may pack the job with the same types again, and the next round unpacks it again.
        self.cluster.remove(job)
        self._holders = None
        self.evictions.append(Eviction(job_id=job, rule=rule, preemptor=preemptor, reason=reason))

    def migrate(self, target: str, jobs: Sequence[str], reason: str) -> None:
        self.drain_target = self.requests[target]
        for j in jobs:
            mover = self.cluster.running[j]
            self.cluster.remove(j)
            self.migrations.append((mover, target))
        self._holders = None
        self.migration_reason = reason


def _first(queue: list[JobRequest], ids: set[str]) -> list[JobRequest]:
    """``queue`` with the jobs of ``ids`` moved to the front (each part in its own order).

    Reclaim's preemptors go first: the GPUs their victims free are theirs. Placed in the policy's
    order, an earlier job (of any team) could land on them by the engine's own scoring and leave the
    preemptor for the next cycle, which then evicted more victims for it (Philly from job 10,000: a
    4-GPU job of a team under its guarantee started 43 s after its submit, two cycles and four
    victims instead of one cycle and two)."""
    return [r for r in queue if r.job_id in ids] + [r for r in queue if r.job_id not in ids]


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
    ordered = queue
    gated: Gate | None = None
    if view.quotas is not None:
        # Team quotas (scheduler.policy.cohort): limits, nominal jobs first, borrowers by fair share.
        asked = {r.job_id: request_milli(r) for r in view.queue}
        gated = gate(queue, view.quotas, capacity_milli=1000 * total, sizes=asked)
        queue = gated.admitted
    cluster = _Cluster(snap, running)
    state = _ClusterRound(cluster, queue, by_team=gated is not None)
    if gated is not None and view.quotas is not None:
        models = [n.gpu_model for n in cluster.snapshot.nodes]
        reclaimed = run_reclaim(state, running, queue, gated, view.quotas, view.now, models)
        if reclaimed:
            queue = _first(queue, {preemptor for _, preemptor in reclaimed})
            state.queue = queue
        helped = run_team_priority(state, running, ordered, gated, view.now)
        if helped:
            # They evicted their own team's work for it: placed first, off the waiting list.
            queue = helped + queue
            state.queue = queue
            state.requests.update({h.job_id: h for h in helped})
            gated.waiting = {j: w for j, w in gated.waiting.items() if j not in {h.job_id for h in helped}}
    if view.rounds:
        run_round(pol, state, view.now)
    evictions = state.evictions
    migrations = state.migrations
    drain_target = state.drain_target

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
                    reason=state.migration_reason,
                    to=to,
                )
            )
    main = schedule(cluster.snapshot, rest, built)
    placements += main.placements
    unschedulable.update(main.unschedulable)
    placed = {p.job_id for p in placements}
    waiting = [r.job_id for r in ordered if r.job_id not in placed]
    if gated is not None:
        unschedulable.update(gated.waiting)
    return Decision(
        placements=placements,
        unschedulable={j: unschedulable.get(j, "waiting for resources") for j in waiting},
        evictions=evictions,
        migrations=out_migrations,
        positions={job_id: i + 1 for i, job_id in enumerate(waiting)},
        queue_order=describe(pol.order, pol.las_thresholds, pol.las_inner),
    )

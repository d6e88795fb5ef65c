"""Reclaim (a step of ``plan_cycle`` with team quotas): borrowed work is evicted for nominal jobs
that the idle GPUs cannot hold, under rule ``reclaim``.

It runs every cycle, not only at rounds: a team under its guarantee gets it back within one cycle
plus the victims' grace period (the platform holds the preemptor out of the queue while the victims
stop, so later cycles choose no more victims for it).

The candidates are all the running jobs of the teams that hold more than their guarantee now; those
marked borrowed (the team's newest admissions that make up its excess now,
``scheduler.policy.cohort.borrowed_marks``) are taken first, the others only when the marked ones
cannot make room for the job. Only the marked ones were candidates before: a few unmarked jobs of
the lender on every node left no node that reclaim could free for a whole-node task (Philly from job
10,000: a team owed 33 GPUs waited 1,060 s for an 8-GPU task while its lender held 169 GPUs beyond
its guarantee, with a 1-GPU job it had placed within its guarantee on 30 of the 32 nodes; marks were
then kept from admission). What is taken from a team stays capped by what it holds beyond its
guarantee.

The choice is ``scheduler.policy.cohort.reclaim``: victims of other teams still beyond their
guarantee, lowest priority, then least attained service, then newest first, node by node (the fewest
on one node that make a task fit there), and only if they make room for the whole job. The
preemption guards hold (``preemptible``, ``min_runtime_s``); each eviction names its preemptor and
says "reclaimed by team Y (under its guarantee)".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.model import JobRequest
from scheduler.policy.cohort import (
    Candidate,
    Gate,
    NodeRoom,
    TeamQuota,
    reclaim,
    reclaim_reason,
    request_milli,
)
from scheduler.policy.preemption import may_evict
from scheduler.policy.round import RoundState
from scheduler.policy.view import RunningJob

RULE = "reclaim"


def run_reclaim(
    state: RoundState[Any, Any],
    running: Mapping[str, RunningJob],
    queue: Sequence[JobRequest],
    gated: Gate,
    quotas: Mapping[str, TeamQuota],
    now: float,
    node_models: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """Evict (through ``state.evict``) the borrowed work that the nominal jobs of ``queue`` (the
    gate's order) need; returns the (victim, preemptor) pairs. ``node_models``: each node's GPU model
    (node order of the state), for tasks that accept only some models."""
    nominal = [r for r in queue if r.team in quotas and r.job_id not in gated.borrowing]
    if not nominal:
        return []
    # Teams beyond their guarantee now: any of their jobs may be taken (module docstring).
    beyond = {t for t, q in quotas.items() if q.used_milli > q.guaranteed_milli}
    candidates = [
        Candidate(
            job_id=job.job_id,
            team=job.request.team,
            milli=request_milli(job.request),
            priority=job.request.priority,
            attained_gpu_s=job.attained_at(now),
            started_at=job.started_at,
            borrowed=job.borrowed,
        )
        for job in running.values()
        if job.request.team in beyond
        and may_evict(job.request.preemptible, job.started_at, job.request.min_runtime_s, now)
    ]
    if not candidates:
        return []

    sizes = state.node_gpus()
    idle = state.idle_per_node()
    nodes = [
        NodeRoom(
            idle=int(idle[n]),
            held=[hs for hs in state.node_tenants(n) if hs],
            gpu_model=node_models[n] if n < len(node_models) else "",
        )
        if sizes[n]
        else NodeRoom(idle=0)
        for n in range(len(sizes))
    ]
    team_of = {r.job_id: r.team for r in nominal}
    chosen = reclaim(nominal, candidates, quotas, nodes=nodes)
    for victim, preemptor in chosen:
        state.evict(victim, RULE, preemptor, reclaim_reason(quotas[team_of[preemptor]]), ())
    return chosen

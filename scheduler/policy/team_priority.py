"""Priority classes inside a team (a step of ``plan_cycle`` with team quotas): a waiting job that its
team's quota holds back may evict running jobs of a *lower class of the same team*, rule
``priority`` (Kueue's ``withinClusterQueue: LowerPriority``).

Victims: the team's running jobs of a lower class (``scheduler.policy.priority_class``) that the
preemption guards allow, lowest priority first, then least attained service, then newest. They are
taken only if together they hold at least the job's request (so the team's usage does not grow and
no limit can be overshot) and free enough GPUs for it with what is idle; else none are. Jobs waiting
for the budget are not helped: evicting frees no GPU-hours. Across teams only reclaim evicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.model import JobRequest
from scheduler.policy.cohort import Gate, request_milli
from scheduler.policy.preemption import may_evict
from scheduler.policy.priority_class import PRIORITY_CLASSES, class_of
from scheduler.policy.round import RoundState, waiting_need
from scheduler.policy.view import RunningJob

RULE = "priority"


def _rank(priority: int) -> int:
    return PRIORITY_CLASSES[class_of(priority)]


def run_team_priority(
    state: RoundState[Any, Any],
    running: Mapping[str, RunningJob],
    ordered: Sequence[JobRequest],
    gated: Gate,
    now: float,
) -> list[JobRequest]:
    """Evict (through ``state.evict``) lower-class work of the same team for the jobs the gate held
    back by quota (in ``ordered``, the policy's order); returns those jobs, now to be placed first."""
    taken: set[str] = set()
    helped: list[JobRequest] = []
    for job in ordered:
        reason = gated.waiting.get(job.job_id, "")
        if not reason.startswith("waiting for quota"):
            continue
        victims = sorted(
            (
                r
                for r in running.values()
                if r.request.team == job.team
                and r.job_id not in taken
                and _rank(r.request.priority) < _rank(job.priority)
                and may_evict(r.request.preemptible, r.started_at, r.request.min_runtime_s, now)
            ),
            key=lambda r: (r.request.priority, r.attained_at(now), -r.started_at, r.job_id),
        )
        need_milli, need_gpus = request_milli(job), waiting_need(job)
        chosen: list[RunningJob] = []
        freed_milli, free = 0, float(state.idle_gpus())
        for victim in victims:
            if freed_milli >= need_milli and free >= need_gpus:
                break
            chosen.append(victim)
            freed_milli += request_milli(victim.request)
            ids = taken | {c.job_id for c in chosen}
            free = float(state.idle_gpus()) + sum(
                1 for c in chosen for hs in state.holders(c.job_id) if all(h in ids for h in hs)
            )
        if not chosen or freed_milli < need_milli or free < need_gpus:
            continue
        for victim in chosen:
            why = (
                f"priority: waiting job {job.job_id} ({class_of(job.priority)}) of team {job.team} outranks "
                f"{class_of(victim.request.priority)} job {victim.job_id} of the same team"
            )
            state.evict(victim.job_id, RULE, job.job_id, why, ())
            taken.add(victim.job_id)
        helped.append(job)
    return helped

"""``plan_cycle``: one scheduling cycle of a policy over a view (interim: order + place)."""

from __future__ import annotations

from scheduler.framework import schedule
from scheduler.model import Decision
from scheduler.policy.view import PolicyView


def plan_cycle(view: PolicyView, policy: object) -> Decision:
    queue = sorted(view.queue, key=lambda j: (-j.priority, j.submitted_at, j.job_id))
    decision = schedule(view.snapshot, queue, getattr(policy, "profile", None))
    placed = {p.job_id for p in decision.placements}
    waiting = [j.job_id for j in queue if j.job_id not in placed]
    decision.positions = {job_id: i + 1 for i, job_id in enumerate(waiting)}
    decision.queue_order = "priority, then submit time"
    return decision

"""The scheduling policy shared by the platform and the simulator: ``plan_cycle(view, policy)``.

Contract (the policy helper's work in progress fills in the rules): queue sort, preemption
(PostFilter), packing, unpacking, drains/migration, then placement by the policy's profile.
"""

from __future__ import annotations

from scheduler.policy.plan import plan_cycle
from scheduler.policy.registry import DEFAULT_POLICY, POLICY_NAMES, Policy, get_policy
from scheduler.policy.view import PolicyView, RunningJob

__all__ = ["DEFAULT_POLICY", "POLICY_NAMES", "Policy", "PolicyView", "RunningJob", "get_policy", "plan_cycle"]

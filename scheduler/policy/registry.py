"""Named policies (interim: the simulator's definitions, until they move here)."""

from __future__ import annotations

from scheduler.sim.policies import POLICY_NAMES, Policy, make_policy


def get_policy(name: str) -> Policy:
    return make_policy(name)


__all__ = ["POLICY_NAMES", "Policy", "get_policy"]

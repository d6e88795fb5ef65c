"""The platform's scheduling policy as its settings configure it, and where the cycle leaves the name of
the rule that ordered the queue. The cycle (jobs.scheduling) and the read side (jobs.selectors) both
use these, so they live below both."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.conf import settings

from jobs.lease import scoped_key
from scheduler import profiles
from scheduler.policy import get_policy

_QUEUE_ORDER_KEY = "jobs:scheduling-cycle:queue-order"


def queue_order_key() -> str:
    """The cache key of the rule that ordered the queue in the last cycle."""
    return scoped_key(_QUEUE_ORDER_KEY)


# The simulator's round interval: preemption, unpacking and drains are considered this often.
ROUND_S = 360.0


def round_seconds() -> float:
    """The cycle's round interval: ``SCHEDULER_ROUND_SECONDS``, else the simulator's."""
    return float(settings.SCHEDULER_ROUND_SECONDS or ROUND_S)


def active_policy() -> Any:
    """The policy named by ``SCHEDULER_POLICY``; a ``SCHEDULER_PROFILE`` other than ``default``
    replaces its placement profile (the policy's rules stay; only node and GPU choice change)."""
    policy = get_policy(settings.SCHEDULER_POLICY)
    name = settings.SCHEDULER_PROFILE
    if name and name != "default" and dataclasses.is_dataclass(policy) and hasattr(policy, "profile"):
        policy = dataclasses.replace(policy, profile=profiles.get_profile(name))  # type: ignore[type-var]
    thresholds = tuple(settings.SCHEDULER_LAS_THRESHOLDS_GPU_S)
    if thresholds and dataclasses.is_dataclass(policy) and hasattr(policy, "las_thresholds"):
        policy = dataclasses.replace(policy, las_thresholds=thresholds)  # type: ignore[type-var]
    return policy

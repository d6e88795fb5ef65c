"""The request shapes of trace jobs under a policy's share rule (``scheduler.policy.packing``), and
the names that moved to ``scheduler.policy`` (``Policy``, ``make_policy``, ``POLICY_NAMES``, the
LAS thresholds), kept importable from here for existing callers."""

from __future__ import annotations

from scheduler.policy.packing import (
    CONTEXT_MIB,
    SHARED_CPU_MILLI,
    SHARED_MEMORY_MIB,
    WHOLE_CPU_MILLI,
    WHOLE_MEMORY_MIB,
    shared_request,
)
from scheduler.policy.registry import (
    LAS_THRESHOLDS_GPU_S,
    OURS_LAS_THRESHOLDS_GPU_S,
    POLICY_NAMES,
    Policy,
    make_policy,
    ours_profile,
)

__all__ = [
    "CONTEXT_MIB",
    "LAS_THRESHOLDS_GPU_S",
    "OURS_LAS_THRESHOLDS_GPU_S",
    "POLICY_NAMES",
    "SHARED_CPU_MILLI",
    "SHARED_MEMORY_MIB",
    "WHOLE_CPU_MILLI",
    "WHOLE_MEMORY_MIB",
    "Policy",
    "make_policy",
    "ours_profile",
    "shared_request",
]

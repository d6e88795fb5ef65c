"""Pods submitted outside the portal (``kubectl apply``) that name the platform's schedulerName.

After each scheduling cycle (jobs.tasks.run_scheduling_cycle) one pass asks the backend for such
pending pods, places them with the active policy's placement profile on what the cluster has left, and
binds them (docs/kubernetes.md §2.5). It runs under the scheduling lease, like the cycle, and counts the
placements of ADMITTED jobs whose pods do not exist yet, so the two never promise the same GPUs twice.
Backends without outside pods (simulated, local) have nothing to do. Pods whose annotations are
invalid stay pending, with the reason in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from jobs import cluster, lease
from jobs.policy_settings import active_policy
from jobs.scheduling import add_pending_binds
from scheduler.backends.base import ClusterBackend
from scheduler.engine.schedule import schedule
from scheduler.model import ClusterSnapshot, JobRequest, Placement

logger = logging.getLogger(__name__)


@runtime_checkable
class OutsidePodsBackend(Protocol):
    def snapshot(self) -> ClusterSnapshot: ...

    def outside_jobs(self) -> tuple[list[JobRequest], dict[str, str]]: ...

    def bind_outside(self, placements: Sequence[Placement]) -> None: ...


@dataclass
class OutsidePass:
    bound: list[str] = field(default_factory=list)  # job ids: pod:<ns>/<name> or gang:<ns>/<gang>
    waiting: dict[str, str] = field(default_factory=dict)  # job id -> why it was not placed
    invalid: dict[str, str] = field(default_factory=dict)  # job id -> what is wrong with its pods


def schedule_outside_pods(*, backend: ClusterBackend | None = None) -> OutsidePass | None:
    """Place and bind the pending outside pods. None when the backend has none to offer or another
    cycle holds the lease (the next pass picks them up)."""
    backend = backend or cluster.get_backend()
    if not isinstance(backend, OutsidePodsBackend):
        return None
    with lease.held() as holding:
        if holding is None:
            return None
        jobs, invalid = backend.outside_jobs()
        for job_id, reason in invalid.items():
            logger.warning("outside pods %s stay pending: %s", job_id, reason)
        result = OutsidePass(invalid=invalid)
        if not jobs:
            return result
        snapshot = backend.snapshot()
        add_pending_binds(snapshot)  # the cycle's own step: both count pending binds the same way
        decision = schedule(snapshot, jobs, active_policy().profile)
        result.waiting = dict(decision.unschedulable)
        try:
            lease.check()  # fencing, as for the cycle's placements
        except lease.LeaseLost:
            return None
        backend.bind_outside(decision.placements)
        result.bound = sorted({p.job_id for p in decision.placements})
        if result.bound:
            logger.info("bound outside pods %s", result.bound)
        return result

"""Fine-grained, interference- and topology-aware GPU scheduler: a pure library.

Entry point: :func:`scheduler.engine.schedule.schedule` ``(snapshot, pending, profile) -> Decision``.
Nothing under this package (except ``backends.kubernetes`` and ``agent``) may import Django.
"""

from scheduler.engine.schedule import schedule
from scheduler.framework import Profile, Status, StatusCode
from scheduler.model import (
    ClusterSnapshot,
    Decision,
    Gpu,
    JobRequest,
    Node,
    Placement,
    TaskRequest,
)

__all__ = [
    "ClusterSnapshot",
    "Decision",
    "Gpu",
    "JobRequest",
    "Node",
    "Placement",
    "Profile",
    "Status",
    "StatusCode",
    "TaskRequest",
    "schedule",
]

"""Fine-grained, interference- and topology-aware GPU scheduler: a pure library.

Entry point: :func:`scheduler.engine.schedule.schedule` ``(snapshot, pending, profile) -> Decision``.
Nothing under this package (except ``backends.kubernetes`` and ``agent``) may import Django.
Importing the package registers the built-in plugins (``scheduler.plugins``), so a profile can be
built from any module of the library without loading anything first.
"""

import scheduler.plugins  # noqa: F401  (registers the built-in plugins)
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

"""Cluster backends: where placements become running tasks (simulated, local, Kubernetes)."""

from scheduler.backends.base import (
    BackendError,
    ClusterBackend,
    PermanentBackendError,
    TaskPhase,
    TaskSpec,
    TaskStatus,
    TransientBackendError,
)

__all__ = [
    "BackendError",
    "ClusterBackend",
    "PermanentBackendError",
    "TaskPhase",
    "TaskSpec",
    "TaskStatus",
    "TransientBackendError",
]

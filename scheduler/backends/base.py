"""The ClusterBackend protocol every backend implements.

Contract:
- ``snapshot()`` returns nodes with their usage *and* the running placements, rebuilt from the backend
  itself (pod annotations, process table, simulated state), so a restarted scheduler loses nothing.
- ``bind(spec, placement)`` starts one task on the placement's node and GPUs. It is idempotent: binding
  a task that already exists with the same placement is a no-op (deterministic names; 409 = done).
- ``task_statuses(job_id=None)`` reports the current phase of every task the backend knows.
- ``delete_job(job_id)`` stops and forgets all tasks of a job (cancel); idempotent.
- ``logs(job_id, task_id)`` returns the task's captured output so far.
- ``preempt_job(job_id, grace_seconds)`` asks every task of a job to stop so that it can run again
  later (DESIGN.md §5b): SIGTERM (or the backend's equivalent), ``grace_seconds`` to write a
  checkpoint, then SIGKILL. It returns without waiting. The tasks then report a finished phase
  (FAILED, no failure category) with a message starting ``preempted``; they stay listed by
  ``task_statuses`` until ``delete_job``, and their GPUs count as used until they are really gone.
  The job's checkpoint folder survives, and the next bind of the same task (``resume=True``) starts
  a new run with the same ``CHECKPOINT_DIR``. Idempotent; a job with no live task is a no-op.
Transient faults raise ``TransientBackendError`` (callers retry with backoff); configuration or
permanent faults raise ``PermanentBackendError`` with a message a person can act on. A bind whose
placement conflicts with the backend's current state (a stale decision) raises
``PlacementConflictError``, a ``PermanentBackendError`` the platform answers by re-planning the job.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from scheduler.model import ClusterSnapshot, Placement


class BackendError(Exception):
    """Base class of backend failures."""


class TransientBackendError(BackendError):
    """Worth retrying: timeouts, 5xx, 429, a busy resource."""


class PermanentBackendError(BackendError):
    """Not worth retrying: bad configuration, forbidden, invalid request."""


class PlacementConflictError(PermanentBackendError):
    """The placement conflicts with what the backend already holds: its GPUs are taken, the node is
    gone, or the same task already runs somewhere else. The decision went stale: the caller re-plans
    the job (back to the queue) instead of retrying the same bind or failing the job."""


# The message of a preempted task starts with this (the platform's sync tells preemption from failure
# by it).
PREEMPTED_PREFIX = "preempted"


# Variables a job may not set (refused at submit with HTTP 400; jobs.specs imports this). They change
# how the dynamic loader, libc or the Python interpreter start a program: what a program loads before
# its own code runs. Every ``LD_*`` name (the loader reads LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT,
# LD_DEBUG_OUTPUT, ...), the rest of glibc's list of variables it ignores in set-uid programs, and the
# Python start-up hooks. PYTHONPATH stays allowed: it only names where a job's own modules live, and
# jobs commonly need it (docs/local-backend.md, "Threat model").
LOADER_ENV_PREFIXES: tuple[str, ...] = ("LD_",)
LOADER_ENV_NAMES: frozenset[str] = frozenset(
    {
        "GCONV_PATH",
        "GETCONF_DIR",
        "HOSTALIASES",
        "LOCALDOMAIN",
        "LOCPATH",
        "MALLOC_TRACE",
        "NIS_PATH",
        "NLSPATH",
        "RESOLV_HOST_CONF",
        "RES_OPTIONS",
        "TZDIR",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONINSPECT",
        "PYTHONEXECUTABLE",
        "PYTHONUSERBASE",
        "PYTHONBREAKPOINT",
    }
)


def is_loader_env(name: str) -> bool:
    """True for a variable a job may not set (see ``LOADER_ENV_NAMES``)."""
    return name in LOADER_ENV_NAMES or name.startswith(LOADER_ENV_PREFIXES)


class TaskPhase(enum.StrEnum):
    PENDING = "PENDING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @property
    def finished(self) -> bool:
        return self in (TaskPhase.SUCCEEDED, TaskPhase.FAILED)


@dataclass
class TaskSpec:
    """Everything a backend needs to start one task of a job."""

    job_id: str
    task_id: str
    rank: int = 0
    world_size: int = 1
    image: str = ""
    command: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    max_runtime_s: int | None = None
    # Simulated backend only: how long the task "runs" in simulated seconds.
    sim_duration_s: float | None = None
    team: str = ""
    user: str = ""
    # Which run of the job this is: 0 the first, n the n-th retry after a platform failure. Task ids
    # stay the same across retries (the platform deletes the previous run before binding again).
    attempt: int = 0
    # Checkpoint contract (DESIGN.md §5b). Every task gets CHECKPOINT_DIR, a folder kept across the
    # job's runs; empty here means "the backend's own per-job folder" (the usual case). ``resume`` is
    # True on every run after the job's first (preempted, migrated or retried): the task gets RESUME=1.
    # ``grace_seconds`` is what the job gets between SIGTERM and SIGKILL when it is preempted or
    # stopped (PREEMPTION_GRACE_SECONDS in its environment).
    checkpoint_dir: str = ""
    resume: bool = False
    grace_seconds: float = 30.0


@dataclass
class TaskStatus:
    job_id: str
    task_id: str
    phase: TaskPhase
    node: str = ""
    gpu_indices: tuple[int, ...] = ()
    exit_code: int | None = None
    # One of USER, PLATFORM, HARDWARE, TIMEOUT, OOM, IMAGE when FAILED.
    failure_category: str = ""
    message: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    # What the task last reported (scheduler.backends.throughput), in its own unit; None = nothing.
    throughput: float | None = None
    # Normalised progress rate of a RUNNING task (1.0 = as fast as alone on its GPUs), as the
    # backend measures it; None where it cannot (the local and Kubernetes backends). The policy's
    # unpack rule reads it (``RunningJob.rate``).
    rate: float | None = None


@runtime_checkable
class ClusterBackend(Protocol):
    name: str

    def snapshot(self) -> ClusterSnapshot: ...

    def bind(self, spec: TaskSpec, placement: Placement) -> None: ...

    def task_statuses(self, job_id: str | None = None) -> list[TaskStatus]: ...

    def delete_job(self, job_id: str) -> None: ...

    def logs(self, job_id: str, task_id: str) -> str: ...

    def preempt_job(self, job_id: str, grace_seconds: float) -> None: ...

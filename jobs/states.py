"""Job states and the table of legal transitions (DESIGN.md §5). Pure Python, no Django."""

from __future__ import annotations

import enum


class JobStatus(enum.StrEnum):
    DRAFT = "DRAFT"
    SUBMITTED = "SUBMITTED"
    QUEUED = "QUEUED"
    ADMITTED = "ADMITTED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    # Asked to stop for another job (preemption, reclaim, migration): SIGTERM sent, grace running.
    PREEMPTING = "PREEMPTING"
    REQUEUED = "REQUEUED"
    STOPPING = "STOPPING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL


class FailureCategory(enum.StrEnum):
    USER = "USER"
    PLATFORM = "PLATFORM"
    HARDWARE = "HARDWARE"
    TIMEOUT = "TIMEOUT"
    OOM = "OOM"
    IMAGE = "IMAGE"


S = JobStatus
TERMINAL = frozenset({S.SUCCEEDED, S.FAILED, S.STOPPED})

# Every legal edge. Anything else is refused by jobs.services.job_transition.
LEGAL_TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    S.DRAFT: frozenset({S.SUBMITTED, S.STOPPED}),
    S.SUBMITTED: frozenset({S.QUEUED, S.FAILED, S.STOPPED}),
    S.QUEUED: frozenset({S.ADMITTED, S.STOPPING, S.STOPPED, S.FAILED}),
    S.ADMITTED: frozenset({S.STARTING, S.QUEUED, S.STOPPING, S.FAILED}),
    S.STARTING: frozenset({S.RUNNING, S.SUCCEEDED, S.FAILED, S.STOPPING, S.REQUEUED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.STOPPING, S.REQUEUED, S.PREEMPTING}),
    # The job may end by itself during its grace period (it finished, or crashed on SIGTERM); a
    # cancel during the grace turns the preemption into a stop.
    S.PREEMPTING: frozenset({S.REQUEUED, S.STOPPING, S.SUCCEEDED, S.FAILED}),
    S.REQUEUED: frozenset({S.QUEUED, S.STOPPING, S.STOPPED}),
    S.STOPPING: frozenset({S.STOPPED, S.FAILED, S.SUCCEEDED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.STOPPED: frozenset(),
}

# States in which a job holds quota (reserved when the cycle admits it, released at its end and when
# it is preempted or requeued).
HOLDS_QUOTA = frozenset({S.ADMITTED, S.STARTING, S.RUNNING, S.PREEMPTING, S.STOPPING})
# States in which a job holds (or is about to hold) GPUs on the cluster.
HOLDS_PLACEMENT = frozenset({S.ADMITTED, S.STARTING, S.RUNNING, S.PREEMPTING, S.STOPPING})
# States in which a job's current run accrues attained service (its processes hold GPUs and run).
RUNS = frozenset({S.RUNNING, S.PREEMPTING, S.STOPPING})


def is_legal(source: JobStatus, target: JobStatus) -> bool:
    return target in LEGAL_TRANSITIONS[source]

"""Writes of the workspaces: a TensorBoard for a job (issue 25 item 4).

A job's image writes TensorBoard event files to ``$CHECKPOINT_DIR/tensorboard`` (docs/workspaces.md);
that folder outlives every run of the job, so a TensorBoard started for it reads them while it runs
and after it ended. The TensorBoard is a small workspace: no GPU, not preemptible, one per job.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from jobs.models import Job, JobKind
from jobs.services import job_submit
from jobs.specs import JobSpec
from jobs.states import JobStatus
from workspaces.spec import DEFAULT_COMMANDS, DEFAULT_PORTS

TENSORBOARD_FOLDER = "tensorboard"  # under the job's CHECKPOINT_DIR


def open_tensorboard(*, job: Job) -> Job | None:
    """A TensorBoard of ``job`` not finished yet, to open instead of starting another."""
    return (
        job.tensorboards.exclude(status__in=[s.value for s in JobStatus if s.is_terminal])
        .order_by("-created_at")
        .first()
    )


def tensorboard_start(*, job: Job, user: Any) -> Job:
    """Start (or find) a TensorBoard workspace reading ``job``'s event files, for ``user`` in the job's
    team; the same checks as any submission (ValidationError, PermissionDenied)."""
    if job.kind == JobKind.WORKSPACE:
        from django.core.exceptions import ValidationError

        raise ValidationError({"kind": ["A TensorBoard reads a batch job's event files, not a workspace's."]})
    with transaction.atomic():
        found = open_tensorboard(job=job)
        if found is not None:
            return found
        spec = JobSpec(
            name=f"tensorboard-{job.pk}",
            command=list(DEFAULT_COMMANDS["tensorboard"]),
            kind=JobKind.WORKSPACE,
            workspace_app="tensorboard",
            workspace_port=DEFAULT_PORTS["tensorboard"],
            cpu_milli=500,
            memory_mib=1024,
            preemptible=False,
        )
        board = job_submit(
            user=user, spec=spec, image=job.image_id, team=job.team, reason=f"TensorBoard of job {job.pk}"
        )
        Job.objects.filter(pk=board.pk).update(tensorboard_of=job)
        board.refresh_from_db()
    return board

"""Idle culling (issue 25): a workspace with no request through the proxy and no activity of its own
for ``settings.WORKSPACE_IDLE_SECONDS`` is stopped, with the reason in its events. Its files stay in
its home folder (the local backend's per-user folder, a volume on Kubernetes), so a new start of the
same workspace (Clone / Start again) finds them.

Activity is the latest of: the run's start, the proxy's last request (WorkspaceActivity), and for
JupyterLab its own account: ``/api/status``'s ``last_activity`` (API requests and kernel messages;
the status call itself does not count) and any kernel still busy (a long cell that prints nothing).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from jobs import dispatch
from jobs.models import Job, JobKind, WorkspaceApp
from jobs.services import JobConflict, job_cancel, job_transition
from jobs.states import JobStatus
from workspaces.access import workspace_token
from workspaces.models import WorkspaceActivity
from workspaces.spec import base_url
from workspaces.targets import workspace_target

logger = logging.getLogger(__name__)
APP_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class Culled:
    job_id: int
    idle_seconds: float


def jupyter_last_activity(target: str, job_id: int, *, now: datetime) -> datetime | None:
    """When JupyterLab last saw activity (``now`` while a kernel is busy); None if it cannot say."""
    headers = {"Authorization": f"token {workspace_token(job_id)}"}
    root = target + base_url(job_id)
    try:
        with httpx.Client(timeout=APP_TIMEOUT_SECONDS, headers=headers) as client:
            kernels = client.get(root + "api/kernels").raise_for_status().json()
            if any(k.get("execution_state") == "busy" for k in kernels):
                return now
            status = client.get(root + "api/status").raise_for_status().json()
    except (httpx.HTTPError, ValueError):
        return None
    found = parse_datetime(str(status.get("last_activity") or ""))
    return found if found is None or timezone.is_aware(found) else timezone.make_aware(found, timezone.utc)


def last_activity(job: Job, *, now: datetime) -> datetime:
    """The latest sign of use of the running workspace ``job``."""
    times = [t for t in (job.run_started_at, job.started_at) if t is not None]
    seen = WorkspaceActivity.objects.filter(job=job).values_list("last_request_at", flat=True).first()
    if seen is not None:
        times.append(seen)
    target = workspace_target(job) if job.workspace_app == WorkspaceApp.JUPYTERLAB else None
    own = jupyter_last_activity(target, job.pk, now=now) if target else None
    if own is not None:
        times.append(own)
    return max(times) if times else now


def _stop_as_platform(job: Job, reason: str) -> bool:
    with transaction.atomic():
        moved = job_transition(
            job=job, to=JobStatus.STOPPING, actor="system", reason=reason, expected_from=JobStatus.RUNNING
        )
        if moved:
            dispatch.request_stop(job.pk)  # after commit
    return moved


def cull_idle_workspaces(*, now: datetime | None = None, idle_seconds: float | None = None) -> list[Culled]:
    """Stop every running workspace idle for ``idle_seconds`` (default: the setting); returns them."""
    now = now or timezone.now()
    limit = settings.WORKSPACE_IDLE_SECONDS if idle_seconds is None else idle_seconds
    culled: list[Culled] = []
    for job in Job.objects.select_related("team", "user").filter(
        kind=JobKind.WORKSPACE, status=JobStatus.RUNNING.value
    ):
        idle = (now - last_activity(job, now=now)).total_seconds()
        if idle < limit:
            continue
        minutes = timedelta(seconds=round(idle)).total_seconds() / 60
        reason = (
            f"culled: idle for {minutes:.0f} min (no request and no kernel activity; the limit is "
            f"{limit / 60:g} min); its files are kept in your home folder: start it again to continue"
        )
        try:
            job_cancel(job=job, user=job.user, reason=reason)
        except PermissionDenied:
            # Its owner may no longer cancel it (left the team, made a viewer): the platform stops it.
            if not _stop_as_platform(job, reason):
                continue
        except JobConflict as exc:
            logger.info("workspace %s not culled: %s", job.pk, exc)
            continue
        culled.append(Culled(job_id=job.pk, idle_seconds=idle))
    return culled

"""What the workspaces add to a job (issue 25): the proxy's last request per workspace, for the idle
culler, and each team's limits on its workspaces, set in admin."""

from __future__ import annotations

from django.db import models

from accounts.models import Team
from jobs.models import Job


class WorkspaceActivity(models.Model):
    """The last request the platform's proxy passed to a workspace (written at most every
    ``workspaces.proxy.ACTIVITY_WRITE_SECONDS`` per web process, not on every request)."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, primary_key=True, related_name="activity")
    last_request_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"workspace {self.job_id}: last request {self.last_request_at:%Y-%m-%d %H:%M:%S}"


class WorkspaceLimit(models.Model):
    """A team's limits on its workspaces not yet finished; a team without a row has none beyond its
    quota."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="workspace_limit")
    max_workspaces = models.PositiveIntegerField(
        null=True, blank=True, help_text="Workspaces queued or running at once; empty = no limit"
    )
    max_gpu_milli = models.PositiveIntegerField(
        null=True, blank=True, help_text="Milli-GPU of all its workspaces together; empty = no limit"
    )

    def __str__(self) -> str:
        return f"workspace limits of {self.team}"

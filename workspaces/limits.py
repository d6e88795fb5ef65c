"""A team's limits on its workspaces (WorkspaceLimit, set in admin), checked at submission with the
other reasons a job could not be taken (jobs.services.cluster_problems)."""

from __future__ import annotations

from django.db.models import F, Sum

from accounts.models import Team
from jobs.models import Job, JobKind
from jobs.specs import JobSpec, gpu_milli_per_replica
from jobs.states import JobStatus

FINISHED = [s.value for s in JobStatus if s.is_terminal]


def workspace_limit_problems(*, spec: JobSpec, team: Team) -> dict[str, list[str]]:
    """Field messages when one more workspace ``spec`` would take ``team`` past its limits."""
    if spec.kind != JobKind.WORKSPACE:
        return {}
    from workspaces.models import WorkspaceLimit

    limit = WorkspaceLimit.objects.filter(team=team).first()
    if limit is None:
        return {}
    open_ones = Job.objects.filter(team=team, kind=JobKind.WORKSPACE).exclude(status__in=FINISHED)
    errors: dict[str, list[str]] = {}
    if limit.max_workspaces is not None and open_ones.count() >= limit.max_workspaces:
        errors["kind"] = [
            f"Team {team.slug} may have {limit.max_workspaces} workspace(s) at once; stop one first."
        ]
    if limit.max_gpu_milli is not None:
        held = open_ones.aggregate(total=Sum(F("gpu_milli") + F("gpus") * 1000))["total"] or 0
        wanted = gpu_milli_per_replica(spec)
        if held + wanted > limit.max_gpu_milli:
            errors["gpu_milli"] = [
                f"Team {team.slug}'s workspaces may hold {limit.max_gpu_milli} milli-GPU together; "
                f"{held} are held, this one asks for {wanted}."
            ]
    return errors

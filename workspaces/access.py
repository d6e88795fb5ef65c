"""Who may open a workspace, and the secret its server is started with.

The token is derived from the platform's SECRET_KEY and the job's id, so it is stored nowhere: the
binding gives it to the task (JUPYTER_TOKEN) and the proxy adds it to every request it forwards.
Browsers never see it, and neither does anyone reading the job through the API.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.utils.crypto import salted_hmac

from accounts.selectors import can_write, role_of
from jobs.models import Job, JobKind
from workspaces import spec as workspace_spec


def workspace_token(job_id: int | str) -> str:
    return salted_hmac("workspaces.access.workspace_token", str(job_id)).hexdigest()


def workspace_env(job: Job) -> dict[str, str]:
    """The platform's variables of a workspace's task ({} for a batch job). The local backend
    replaces host, port and home with its own (a free port of 127.0.0.1, the user's home folder)."""
    if job.kind != JobKind.WORKSPACE:
        return {}
    return {
        workspace_spec.HOST: "0.0.0.0",  # noqa: S104 (inside its pod; only the Service reaches it)
        workspace_spec.PORT: str(job.workspace_port or 8888),
        workspace_spec.BASE_URL: workspace_spec.base_url(job.pk),
        "JUPYTER_TOKEN": workspace_token(job.pk),
        # A TensorBoard's source job: each backend knows where that job's CHECKPOINT_DIR lives.
        **({workspace_spec.LOGS_OF: str(job.tensorboard_of_id)} if job.tensorboard_of_id else {}),
    }


def workspace_for_user(*, user: Any, job_id: int | str) -> Job:
    """The workspace ``job_id`` if ``user`` may open it: an owner or member of its team (viewers may
    read jobs, not run code in a colleague's notebook). Raises Http404 otherwise, for an unknown id
    and a batch job alike, so an outsider learns nothing."""
    try:
        job = Job.objects.select_related("team").get(pk=int(job_id), kind=JobKind.WORKSPACE)
    except (Job.DoesNotExist, ValueError, TypeError):
        raise Http404("No workspace with this id.") from None
    if not can_write(role_of(user=user, team=job.team_id)):
        raise Http404("No workspace with this id.")
    return job

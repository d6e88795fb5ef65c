"""Where the proxy reaches a running workspace: the backend says (``workspace_target(job_id)``:
the local backend's recorded 127.0.0.1 port, the Kubernetes Service's address, the simulated
backend's stand-in page). A backend without the method has no workspaces."""

from __future__ import annotations

from jobs import cluster
from jobs.models import Job
from jobs.states import JobStatus


def workspace_target(job: Job) -> str | None:
    """The base address (``http://host:port``) of ``job``'s server while it runs, else None."""
    if job.status != JobStatus.RUNNING.value:
        return None
    backend = cluster.get_backend()
    find = getattr(backend, "workspace_target", None)
    return find(str(job.pk)) if callable(find) else None

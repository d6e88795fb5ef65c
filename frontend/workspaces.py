"""The portal's workspace pages (issue 25): a form to start one, and the TensorBoard button of a job.
The Open button itself is a link to the proxy (/workspaces/<id>/, workspaces.proxy)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from frontend import selectors
from jobs.models import Job
from jobs.selectors import job_for_user
from jobs.services import job_submit
from jobs.specs import WORKSPACE_APPS
from jobs.validation import check_submission
from workspaces.services import tensorboard_start
from workspaces.spec import DEFAULT_GPU_MEMORY_MIB, DEFAULT_GPU_MILLI


def open_url(job: Job) -> str:
    """Where the Open button goes: JupyterLab's own page, else the app's root."""
    root = f"/workspaces/{job.pk}/"
    return root + "lab" if job.workspace_app == "jupyterlab" else root


def _submission(post: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "kind": "workspace",
        "name": post.get("name", ""),
        "team": post.get("team", ""),
        "image": post.get("image", ""),
        "workspace_app": post.get("workspace_app", "jupyterlab"),
    }
    for name in ("gpu_milli", "gpu_memory_mib", "cpu_milli", "memory_mib"):
        value = post.get(name, "").strip()
        if value:
            data[name] = int(value) if value.lstrip("-").isdigit() else value
    if command := post.get("command", "").strip():
        data["command"] = command
    return data


@login_required
@require_http_methods(["GET", "POST"])
def workspace_new(request: HttpRequest) -> HttpResponse:
    errors: dict[str, list[str]] = {}
    values: dict[str, Any] = {"gpu_milli": DEFAULT_GPU_MILLI, "gpu_memory_mib": DEFAULT_GPU_MEMORY_MIB}
    if request.method == "POST":
        values = _submission(request.POST)
        checked = check_submission(user=request.user, data=values)
        errors = checked.errors
        if checked.ok:
            assert checked.spec is not None and checked.image is not None
            try:
                job = job_submit(user=request.user, spec=checked.spec, image=checked.image, team=checked.team)
            except ValidationError as exc:
                errors = exc.message_dict
            else:
                return redirect("frontend:job", job_id=job.pk)
    context = {
        "nav": "workspace",
        "teams": selectors.writable_teams(user=request.user),
        "images": selectors.active_images(),
        "apps": WORKSPACE_APPS,
        "values": values,
        "errors": errors,
    }
    return render(request, "frontend/workspace_new.html", context, status=400 if errors else 200)


@login_required
@require_POST
def tensorboard_new(request: HttpRequest, job_id: int) -> HttpResponse:
    job = job_for_user(user=request.user, job_id=job_id)  # Http404 for other teams' jobs
    try:
        board = tensorboard_start(job=job, user=request.user)
    except (ValidationError, PermissionDenied) as exc:
        text = " ".join(getattr(exc, "messages", [str(exc)]))
        return HttpResponse(f"No TensorBoard started: {text}", status=400, content_type="text/plain")
    return redirect("frontend:job", job_id=board.pk)

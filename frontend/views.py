"""The portal's pages. Thin: each view picks the data of one page from frontend.selectors (or the
apps' selectors) and renders a template; the pages' scripts then call the REST API (/api/v1/) with
the session cookie and the CSRF token, so the browser and curl see the same rules and errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET, require_POST

from accounts.models import Role
from accounts.selectors import role_of, teams_for_user
from frontend import selectors
from frontend.yaml_spec import YamlSpecError, dump_spec, parse_spec
from jobs.selectors import job_for_user
from jobs.states import JobStatus


def _error(status: int, message: str, code: str, fields: dict[str, list[str]] | None = None) -> JsonResponse:
    """The API's one error shape, so the pages' scripts handle every answer the same way."""
    return JsonResponse(
        {"message": message, "code": code, "extra": {"fields": fields} if fields else {}}, status=status
    )


def json_login_required(view: Any) -> Any:
    """Like login_required, but a 401 in the error shape instead of a redirect (fetch() callers)."""

    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return _error(401, "Sign in first.", "not_authenticated")
        return view(request, *args, **kwargs)

    wrapped.__name__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return wrapped


@login_required
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    return render(request, "frontend/dashboard.html", {"nav": "dashboard"})


@login_required
@require_GET
def job_list(request: HttpRequest) -> HttpResponse:
    context = {
        "nav": "jobs",
        "teams": teams_for_user(request.user),
        "statuses": [s.value for s in JobStatus],
    }
    return render(request, "frontend/job_list.html", context)


@login_required
@require_GET
def job_submit(request: HttpRequest) -> HttpResponse:
    context = {
        "nav": "submit",
        "teams": selectors.writable_teams(user=request.user),
        "images": selectors.active_images(),
    }
    return render(request, "frontend/job_submit.html", context)


@login_required
@require_GET
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = job_for_user(user=request.user, job_id=job_id)  # Http404 for other teams' jobs
    role = role_of(user=request.user, team=job.team_id)
    context = {
        "nav": "jobs",
        "job": job,
        # The API decides (403 with a message); these only hide buttons that could not work.
        "can_cancel": request.user.is_superuser
        or role == Role.OWNER
        or (role == Role.MEMBER and job.user_id == request.user.pk),
        "can_submit": request.user.is_superuser or role in (Role.OWNER, Role.MEMBER),
    }
    return render(request, "frontend/job_detail.html", context)


@login_required
@require_GET
def team_index(request: HttpRequest) -> HttpResponse:
    first = teams_for_user(request.user).first()
    if first is not None:
        return redirect("frontend:team", team_id=first.pk)
    return render(request, "frontend/team.html", {"nav": "team", "page": None})


@login_required
@require_GET
def team_detail(request: HttpRequest, team_id: int) -> HttpResponse:
    page = selectors.team_page(user=request.user, team_id=team_id)
    if page is None:
        raise Http404("No team with this id.")
    chart = {
        "days": [day.isoformat() for day, _ in page.daily_hours],
        "hours": [hours for _, hours in page.daily_hours],
        "budget": page.usage.gpu_hours_per_month,
    }
    context = {
        "nav": "team",
        "page": page,
        "teams": teams_for_user(request.user),
        "chart": chart,
    }
    return render(request, "frontend/team.html", context)


@login_required
@require_GET
def image_list(request: HttpRequest) -> HttpResponse:
    return render(request, "frontend/images.html", {"nav": "images", "images": selectors.active_images()})


@json_login_required
@require_GET
def summary(request: HttpRequest) -> JsonResponse:
    """``GET /portal/summary``: cluster-wide counts of running and waiting jobs (no names)."""
    return JsonResponse(selectors.job_counts())


def _json_body(request: HttpRequest) -> dict[str, Any] | None:
    try:
        data = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


@json_login_required
@require_POST
def yaml_parse(request: HttpRequest) -> JsonResponse:
    """``POST /portal/yaml/parse`` ``{"yaml": text}`` -> ``{"spec": {...}}``, or 400 with the line."""
    body = _json_body(request)
    if body is None or not isinstance(body.get("yaml"), str):
        return _error(400, 'Send {"yaml": "<text>"}.', "bad_request")
    try:
        spec = parse_spec(body["yaml"])
    except YamlSpecError as exc:
        return _error(400, f"The YAML cannot be read: {exc}", "invalid_yaml", {"yaml": [str(exc)]})
    return JsonResponse({"spec": spec})


@json_login_required
@require_POST
def yaml_dump(request: HttpRequest) -> JsonResponse:
    """``POST /portal/yaml/dump`` ``{"spec": {...}}`` -> ``{"yaml": text}``."""
    body = _json_body(request)
    if body is None or not isinstance(body.get("spec"), dict):
        return _error(400, 'Send {"spec": {...}}.', "bad_request")
    return JsonResponse({"yaml": dump_spec(body["spec"])})


def _plotly_js() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


@cache_control(max_age=86400, public=True)
@require_GET
def vendor_plotly(request: HttpRequest) -> FileResponse:
    """plotly.js as shipped inside the ``plotly`` PyPI package: no third-party code in the repo and no
    Node.js build. Public: it is the library's own file."""
    path = _plotly_js()
    if not path.exists():
        raise Http404("plotly.min.js is not installed.")
    return FileResponse(path.open("rb"), content_type="text/javascript; charset=utf-8")

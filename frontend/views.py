"""The portal's pages. Thin: each view picks the data of one page from frontend.selectors (or the
apps' selectors) and renders a template; the pages' scripts then call the REST API (/api/v1/) with
the session cookie and the CSRF token, so the browser and curl see the same rules and errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET, require_POST

from accounts.models import Role
from accounts.selectors import role_of, teams_for_user, tokens_for_user
from accounts.services import token_create, token_revoke
from frontend import bulk_cancel, selectors
from frontend import job_usage as job_usage_selectors
from frontend import nodes as nodes_selectors
from frontend import team_usage as team_usage_selectors
from frontend import workspaces as workspace_pages
from frontend.token_forms import TokenCreateForm
from frontend.yaml_spec import YamlSpecError, dump_spec, parse_spec
from jobs.selectors import job_for_user, job_logs, jobs_for_user
from jobs.specs import MAX_REPLICAS
from jobs.states import JobStatus
from scheduler.backends.base import BackendError


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
    from quotas.selectors import budget_warnings

    warnings = budget_warnings(teams=teams_for_user(user=request.user))
    return render(request, "frontend/dashboard.html", {"nav": "dashboard", "budget_warnings": warnings})


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
        # Teams where the user only reads: the page says so by name instead of "not a member".
        "viewer_teams": [t for t in teams_for_user(request.user) if t.role == Role.VIEWER],  # type: ignore[attr-defined]
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
        "workspace_open_url": workspace_pages.open_url(job),
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


@login_required
@require_GET
def job_spec_yaml(request: HttpRequest, job_id: int) -> HttpResponse:
    """``/jobs/<id>/spec.yaml``: the job's spec as a YAML attachment, the fields ``POST /api/v1/jobs/``
    and ``gpuctl submit -f`` take (access as its page)."""
    job = job_for_user(user=request.user, job_id=job_id)  # Http404 for other teams' jobs
    response = HttpResponse(
        dump_spec(selectors.job_spec_document(job)), content_type="text/yaml; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="job-{job.pk}.yaml"'
    return response


# uPlot (MIT, ~45 KB minified) as shipped inside the ``metaflow-card-uplot`` wheel, which carries the
# library's own files and nothing else that the portal imports (its Python module needs Metaflow, so
# the files are found through the distribution's file list, never imported).
UPLOT_DIST = "metaflow-card-uplot"
UPLOT_FILES = {"uplot.min.js": "uPlot.iife.min.js", "uplot.min.css": "uPlot.min.css"}
UPLOT_TYPES = {"uplot.min.js": "text/javascript; charset=utf-8", "uplot.min.css": "text/css; charset=utf-8"}


def uplot_file(name: str) -> Path | None:
    """The installed path of one of uPlot's files (``UPLOT_FILES``), or None when it is missing."""
    from importlib import metadata

    wanted = UPLOT_FILES.get(name)
    if wanted is None:
        return None
    try:
        distribution = metadata.distribution(UPLOT_DIST)
    except metadata.PackageNotFoundError:
        return None
    for entry in distribution.files or []:
        if entry.name == wanted:
            return Path(str(distribution.locate_file(entry)))
    return None


FAVICON = Path(__file__).resolve().parent / "static" / "frontend" / "favicon.svg"


@cache_control(max_age=86400, public=True)
@require_GET
def favicon(request: HttpRequest) -> FileResponse:
    """``/favicon.ico``, which browsers ask for on every page, the admin's too (an SVG: Chromium and
    Firefox take it whatever the name says)."""
    return FileResponse(FAVICON.open("rb"), content_type="image/svg+xml")


@cache_control(max_age=86400, public=True)
@require_GET
def vendor_uplot(request: HttpRequest, name: str) -> FileResponse:
    """uPlot's script or style sheet from its PyPI package: no third-party code in the repository and
    no Node.js build. Public: it is the library's own file."""
    path = uplot_file(name)
    if path is None or not path.exists():
        raise Http404("uPlot is not installed.")
    return FileResponse(path.open("rb"), content_type=UPLOT_TYPES[name])


# --- Pages of the team lead and the operator: usage, nodes, API tokens; jobs-list and log helpers. ---


@login_required
@require_GET
def usage_index(request: HttpRequest) -> HttpResponse:
    """``/usage/``: the Usage page of the user's first team."""
    first = team_usage_selectors.usage_teams(request.user).first()
    if first is not None:
        return redirect("frontend:team-usage", team_id=first.pk)
    context = {"nav": "usage", "page": None, "error": "You are not a member of any team yet."}
    return render(request, "frontend/team_usage.html", context)


@login_required
@require_GET
def team_usage(request: HttpRequest, team_id: int) -> HttpResponse:
    """``/teams/<id>/usage/?month=YYYY-MM``: the team lead's view, from the usage ledger."""
    try:
        page = team_usage_selectors.team_usage_page(
            user=request.user, team_id=team_id, month=request.GET.get("month") or None
        )
    except team_usage_selectors.BadMonth as exc:
        context: dict[str, Any] = {"nav": "usage", "page": None, "error": str(exc)}
        return render(request, "frontend/team_usage.html", context, status=400)
    if page is None:
        raise Http404("No team with this id.")
    chart = {
        "users": [name for name, _ in page.by_user],
        "user_hours": [hours for _, hours in page.by_user],
        "days": [day.isoformat() for day, _ in page.by_day],
        "day_hours": [hours for _, hours in page.by_day],
    }
    teams = team_usage_selectors.usage_teams(request.user)
    context = {"nav": "usage", "page": page, "chart": chart, "teams": teams}
    return render(request, "frontend/team_usage.html", context)


@login_required
@require_GET
def node_list(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "frontend/nodes.html",
        {"nav": "nodes", "page": nodes_selectors.nodes_page(user=request.user)},
    )


def _tokens_page(request: HttpRequest, form: TokenCreateForm, **extra: Any) -> HttpResponse:
    context = {
        "nav": "tokens",
        "form": form,
        "tokens": tokens_for_user(user=request.user),
        "now": timezone.now(),
        **extra,
    }
    return render(request, "frontend/tokens.html", context, status=400 if form.errors else 200)


@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    """``/tokens/``: the user's API tokens; a POST creates one and shows its value this once."""
    if request.method == "POST":
        form = TokenCreateForm(request.POST)
        if form.is_valid():
            try:
                token, raw = token_create(
                    user=request.user,
                    name=form.cleaned_data["name"],
                    ttl_days=form.cleaned_data["expires_in_days"],
                )
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                return _tokens_page(request, TokenCreateForm(), created=token, raw_token=raw)
        return _tokens_page(request, form)
    if request.method != "GET":
        return HttpResponse(status=405, headers={"Allow": "GET, POST"})
    return _tokens_page(request, TokenCreateForm())


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    token = tokens_for_user(user=request.user).filter(pk=token_id).first()
    if token is None:
        raise Http404("No token with this id.")
    if token_revoke(token=token, actor=request.user):
        messages.success(request, f"Token “{token.name}” ({token.prefix}…) is revoked.")
    return redirect("frontend:tokens")


@login_required
@require_GET
def job_logs_download(request: HttpRequest, job_id: int) -> HttpResponse:
    """``/jobs/<id>/logs.txt``: the job's output as a plain-text attachment (access as its page)."""
    job = job_for_user(user=request.user, job_id=job_id)  # Http404 for other teams' jobs
    task = request.GET.get("task", "")
    if task and not (task.isascii() and task.isdigit() and len(task) <= 3 and int(task) <= MAX_REPLICAS):
        return HttpResponse(
            f"task: a task index from 0 to {MAX_REPLICAS}.\n", status=400, content_type="text/plain"
        )
    try:
        tasks = job_logs(job=job, task_index=int(task) if task else None)
    except BackendError as exc:
        return HttpResponse(
            f"The logs cannot be read right now: {exc}\n", status=503, content_type="text/plain"
        )
    # The same text as the job page shows: a heading per task when there are several.
    text = "\n".join(
        (f"== {t['task']} ({t['phase']}) ==\n" if len(tasks) > 1 else "") + (t["log"] or "") for t in tasks
    )
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    suffix = f"-task-{task}" if task else ""
    response["Content-Disposition"] = f'attachment; filename="job-{job.pk}{suffix}-logs.txt"'
    return response


MAX_LISTED = 100


def _ids(values: Any) -> list[int] | None:
    """A list of 1..MAX_LISTED positive job ids, or None."""
    if not isinstance(values, list) or not 0 < len(values) <= MAX_LISTED:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v < 2**63 for v in values):
        return None
    return values


@json_login_required
@require_GET
def jobs_usage(request: HttpRequest) -> JsonResponse:
    """``GET /portal/jobs/usage?ids=1,2,3`` -> ``{"jobs": {"1": {"runtime_seconds", "gpu_hours"}}}``
    for the jobs of the caller's teams among ``ids`` (others are left out, as the API's 404)."""
    raw = request.GET.get("ids", "")
    try:
        ids = _ids([int(part) for part in raw.split(",")])
    except ValueError:
        ids = None
    if ids is None:
        return _error(
            400, "ids: up to 100 job ids, comma-separated.", "invalid", {"ids": ["Give job ids like 1,2,3."]}
        )
    jobs = list(jobs_for_user(user=request.user).filter(pk__in=ids))
    usage = job_usage_selectors.jobs_usage(jobs=jobs)
    return JsonResponse({"jobs": {str(pk): vars(u) for pk, u in usage.items()}})


@json_login_required
@require_POST
def jobs_bulk_cancel(request: HttpRequest) -> JsonResponse:
    """``POST /portal/jobs/cancel`` ``{"ids": [..]}`` -> ``{"cancelled": [..], "refused": [..]}``."""
    body = _json_body(request)
    ids = _ids(body.get("ids")) if body is not None else None
    if ids is None:
        return _error(
            400, 'Send {"ids": [job ids]} with 1 to 100 ids.', "invalid", {"ids": ["A list of job ids."]}
        )
    return JsonResponse(vars(bulk_cancel.jobs_cancel(user=request.user, job_ids=ids)))

"""REST views: the cluster's sampled history and the GPU-hour usage reports (JSON or CSV)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import Team
from accounts.selectors import teams_for_user
from config.api import ErrorSerializer
from observability.history import RANGES, history_points
from observability.usage import GROUP_KEYS, parse_group_by, parse_month, usage_csv, usage_report

# What the parsers accept, for the OpenAPI schema (they stay the judges of the input).
_KEY = "(?:" + "|".join(GROUP_KEYS) + ")"
GROUP_BY_PATTERN = f"^{_KEY}(?:,{_KEY})*$"
MONTH_PATTERN = "^(?:19[7-9][0-9]|[2-9][0-9]{3})-(?:0[1-9]|1[0-2])$"


class CSVRenderer(BaseRenderer):
    """Lets ``?format=csv`` through DRF's content negotiation; the view writes the CSV itself."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> Any:
        return data


class ClusterHistoryView(APIView):
    """``GET /api/v1/cluster/history/?range=1h|1d|7d|30d``: the sampled cluster history."""

    @extend_schema(
        summary="The cluster's allocation, fragmentation and jobs over time (sampled every minute)",
        parameters=[OpenApiParameter("range", str, enum=list(RANGES), description="default 1d")],
        responses={200: OpenApiTypes.OBJECT, 400: ErrorSerializer, 401: ErrorSerializer},
    )
    def get(self, request: Request) -> Response:
        range_name = request.query_params.get("range", "1d")
        if range_name not in RANGES:
            raise ValidationError({"range": [f"Choose one of {', '.join(RANGES)}."]})
        return Response(history_points(range_name=range_name))


def _visible_team_slugs(user: Any) -> list[str] | None:
    """Slugs of the teams the caller may report on; None = every team (quota admins)."""
    from quotas.api import is_quota_admin

    if is_quota_admin(user):
        return None
    return list(teams_for_user(user=user).values_list("slug", flat=True))


class UsageView(APIView):
    """``GET /api/v1/usage/?group_by=team,user&month=YYYY-MM[&team=slug][&format=csv]``."""

    renderer_classes = [JSONRenderer, CSVRenderer]

    @extend_schema(
        summary="GPU-hours per team, user, image and/or month, from the run ledger",
        parameters=[
            OpenApiParameter(
                "group_by",
                str,
                description="comma-separated: team, user, image, month (default team)",
                pattern=GROUP_BY_PATTERN,
            ),
            OpenApiParameter(
                "month", str, description="YYYY-MM (UTC); all time when absent", pattern=MONTH_PATTERN
            ),
            OpenApiParameter("team", str, description="team slug; default: all your teams"),
            OpenApiParameter("format", str, enum=["json", "csv"], description="csv: a CSV attachment"),
        ],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "text/csv"): OpenApiTypes.STR,
            400: ErrorSerializer,
            401: ErrorSerializer,
            404: ErrorSerializer,
        },
    )
    def get(self, request: Request) -> Response | HttpResponse:
        params = request.query_params
        errors: dict[str, list[str]] = {}
        try:
            group_by = parse_group_by(params.get("group_by"))
        except ValueError as exc:
            errors["group_by"] = [str(exc)]
        # A parameter given empty is refused like any other bad value (absent means "the default").
        month = params.get("month")
        if month is not None:
            try:
                parse_month(month)
            except ValueError as exc:
                errors["month"] = [str(exc)]
        if errors:
            raise ValidationError(errors)
        visible = _visible_team_slugs(request.user)
        team = params.get("team")
        if team is not None and (
            (visible is not None and team not in visible) or not Team.objects.filter(slug=team).exists()
        ):
            raise Http404("No team with this slug among your teams.")
        rows = usage_report(group_by=group_by, month=month, team=team, teams=visible)
        if getattr(request.accepted_renderer, "format", "") == "csv":
            name = f"gpu-usage-{month or 'all'}-{timezone.now():%Y%m%d}.csv"
            response = HttpResponse(usage_csv(rows, group_by), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="{name}"'
            return response
        return Response({"group_by": group_by, "month": month, "results": rows})

    def handle_exception(self, exc: Exception) -> Response:
        # Errors answer in the API's JSON shape also when CSV was asked for.
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)

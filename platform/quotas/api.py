"""REST views of quotas: usage vs limits of the caller's teams (with borrowing, fair share, budget and
waiting jobs); quota admins may change limits and grant GPU-hours."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import Team
from accounts.selectors import teams_for_user
from config.api import ErrorSerializer
from quotas import selectors, services
from quotas.serializers import BudgetGrantInput, QuotaUpdateInput, QuotaUsageOutput

ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer}


def is_quota_admin(user: Any) -> bool:
    """Staff with the Django permission to change quotas (the "quota admin" persona)."""
    return bool(user.is_staff and user.has_perm("quotas.change_quota"))


def _visible_teams(user: Any) -> Any:
    return Team.objects.order_by("name") if is_quota_admin(user) else teams_for_user(user=user)


def _team(user: Any, team_id: int) -> Team:
    team = _visible_teams(user).filter(pk=team_id).first()
    if team is None:
        raise Http404("No team with this id.")
    return team


class QuotaListView(APIView):
    @extend_schema(
        summary="Usage vs limits of your teams",
        responses={200: QuotaUsageOutput(many=True), 401: ErrorSerializer},
    )
    def get(self, request: Request) -> Response:
        usages = selectors.quota_usages(teams=_visible_teams(request.user), user=request.user)
        return Response(QuotaUsageOutput(usages, many=True).data)


class QuotaDetailView(APIView):
    @extend_schema(summary="Usage vs limits of one team", responses={200: QuotaUsageOutput, **ERRORS})
    def get(self, request: Request, team_id: int) -> Response:
        usage = selectors.quota_usage(team=_team(request.user, team_id), user=request.user)
        return Response(QuotaUsageOutput(usage).data)

    @extend_schema(
        summary="Change a team's limits (quota admins)",
        request=QuotaUpdateInput,
        responses={200: QuotaUsageOutput, **ERRORS},
    )
    def patch(self, request: Request, team_id: int) -> Response:
        team = _team(request.user, team_id)
        if not is_quota_admin(request.user):
            raise PermissionDenied("Only quota admins can change quotas.")
        data = QuotaUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        services.quota_set(team=team, actor=request.user, **data.validated_data)
        return Response(QuotaUsageOutput(selectors.quota_usage(team=team, user=request.user)).data)


class BudgetGrantView(APIView):
    @extend_schema(
        summary="Grant a team extra GPU-hours for this month (quota admins; audited)",
        request=BudgetGrantInput,
        responses={201: QuotaUsageOutput, **ERRORS},
    )
    def post(self, request: Request, team_id: int) -> Response:
        team = _team(request.user, team_id)
        if not is_quota_admin(request.user):
            raise PermissionDenied("Only quota admins can grant GPU-hours.")
        data = BudgetGrantInput(data=request.data)
        data.is_valid(raise_exception=True)
        services.budget_grant(team=team, actor=request.user, **data.validated_data)
        return Response(
            QuotaUsageOutput(selectors.quota_usage(team=team, user=request.user)).data, status=201
        )

"""REST views of tokens and teams. Thin: the rules live in accounts.services and accounts.selectors."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import schema as _schema  # noqa: F401  (registers the token auth scheme for OpenAPI)
from accounts import selectors, services, throttles
from accounts.models import ApiToken, Membership, Role, Team
from accounts.serializers import (
    MemberAddInput,
    MemberOutput,
    MemberRoleInput,
    TeamOutput,
    TokenCreatedOutput,
    TokenObtainInput,
    TokenOutput,
)
from config.api import ErrorSerializer

ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer}


def _token_data(token: ApiToken, raw: str | None = None) -> dict[str, Any]:
    data = TokenOutput(
        {
            "id": token.pk,
            "name": token.name,
            "prefix": token.prefix,
            "created_at": token.created_at,
            "expires_at": token.expires_at,
            "revoked_at": token.revoked_at,
            "last_used_at": token.last_used_at,
            "is_active": token.is_active,
        }
    ).data
    if raw is not None:
        data["token"] = raw
    return data


class TokenView(APIView):
    """``POST /api/v1/auth/token/`` trades a username and password for a new token (shown once);
    ``DELETE`` revokes the token the request was made with (sign out). Sign-ins are rate limited per
    client address and locked out after repeated failures (accounts.throttles)."""

    throttle_classes = [
        throttles.AuthRateThrottle,
        throttles.LoginLockoutThrottle,
        throttles.WriteRateThrottle,
    ]

    def get_authenticators(self) -> list[Any]:
        # Signing in needs no authentication; a stale token header must not block it.
        if self.request is not None and self.request.method == "POST":
            return []
        return super().get_authenticators()

    def get_permissions(self) -> list[Any]:
        if self.request.method == "POST":
            return [AllowAny()]
        return super().get_permissions()

    @extend_schema(
        summary="Create an API token",
        request=TokenObtainInput,
        responses={201: TokenCreatedOutput, 400: ErrorSerializer, 429: ErrorSerializer},
        auth=[],
    )
    def post(self, request: Request) -> Response:
        data = TokenObtainInput(data=request.data)
        data.is_valid(raise_exception=True)
        failures = throttles.login_failures()
        username = data.validated_data["username"]
        try:
            token, raw = services.token_obtain(**data.validated_data)
        except ValidationError:
            failures.record_failure(username=username, address=throttles.client_address(request))
            raise
        failures.record_success(username=username)
        return Response(_token_data(token, raw), status=status.HTTP_201_CREATED)

    @extend_schema(summary="Revoke the token of this request", responses={204: None, **ERRORS})
    def delete(self, request: Request) -> Response:
        if not isinstance(request.auth, ApiToken):
            return Response(
                {"message": "This request was not made with a token.", "code": "not_token_auth", "extra": {}},
                status=status.HTTP_400_BAD_REQUEST,
            )
        services.token_revoke(token=request.auth, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenListView(APIView):
    @extend_schema(
        summary="Your API tokens (never their secrets)",
        responses={200: TokenOutput(many=True), 401: ErrorSerializer},
    )
    def get(self, request: Request) -> Response:
        return Response([_token_data(t) for t in selectors.tokens_for_user(user=request.user)])


class TokenDetailView(APIView):
    @extend_schema(summary="Revoke one of your tokens", request=None, responses={204: None, **ERRORS})
    def delete(self, request: Request, token_id: int) -> Response:
        token = selectors.tokens_for_user(user=request.user).filter(pk=token_id).first()
        if token is None:
            raise Http404("No token with this id.")
        services.token_revoke(token=token, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _my_team(user: Any, team_id: int) -> Team:
    team = selectors.teams_for_user(user=user).filter(pk=team_id).first()
    if team is None:
        raise Http404("No team with this id.")
    return team


class TeamListView(APIView):
    @extend_schema(
        summary="Your teams and your role in each",
        responses={200: TeamOutput(many=True), 401: ErrorSerializer},
    )
    def get(self, request: Request) -> Response:
        return Response(TeamOutput(selectors.teams_for_user(user=request.user), many=True).data)


class TeamDetailView(APIView):
    @extend_schema(summary="One of your teams", responses={200: TeamOutput, **ERRORS})
    def get(self, request: Request, team_id: int) -> Response:
        return Response(TeamOutput(_my_team(request.user, team_id)).data)


def _owned_team(user: Any, team_id: int) -> Team:
    """A team the caller owns: 404 if they are not in it, 403 if they are but not as owner."""
    team = _my_team(user, team_id)
    if team.role != Role.OWNER:
        raise exceptions.PermissionDenied("Only team owners can change its members.")
    return team


class TeamMembersView(APIView):
    @extend_schema(summary="Members of one of your teams", responses={200: MemberOutput(many=True), **ERRORS})
    def get(self, request: Request, team_id: int) -> Response:
        team = _my_team(request.user, team_id)
        return Response(MemberOutput(selectors.team_members(team=team), many=True).data)

    @extend_schema(
        summary="Add a member (team owners)", request=MemberAddInput, responses={201: MemberOutput, **ERRORS}
    )
    def post(self, request: Request, team_id: int) -> Response:
        team = _owned_team(request.user, team_id)
        data = MemberAddInput(data=request.data)
        data.is_valid(raise_exception=True)
        user = (
            get_user_model().objects.filter(username=data.validated_data["username"], is_active=True).first()
        )
        if user is None:
            raise ValidationError({"username": ["No active user with this username."]})
        membership = services.membership_set(
            team=team, user=user, role=data.validated_data["role"], actor=request.user
        )
        return Response(MemberOutput(membership).data, status=status.HTTP_201_CREATED)


class TeamMemberView(APIView):
    def _membership(self, request: Request, team_id: int, user_id: int) -> tuple[Team, Membership]:
        team = _owned_team(request.user, team_id)
        membership = selectors.team_members(team=team).filter(user_id=user_id).first()
        if membership is None:
            raise Http404("No member with this user id.")
        return team, membership

    @extend_schema(
        summary="Change a member's role (team owners)",
        request=MemberRoleInput,
        responses={200: MemberOutput, **ERRORS},
    )
    def patch(self, request: Request, team_id: int, user_id: int) -> Response:
        team, membership = self._membership(request, team_id, user_id)
        data = MemberRoleInput(data=request.data)
        data.is_valid(raise_exception=True)
        updated = services.membership_set(
            team=team, user=membership.user, role=data.validated_data["role"], actor=request.user
        )
        return Response(MemberOutput(updated).data)

    @extend_schema(summary="Remove a member (team owners)", request=None, responses={204: None, **ERRORS})
    def delete(self, request: Request, team_id: int, user_id: int) -> Response:
        team, membership = self._membership(request, team_id, user_id)
        services.membership_remove(team=team, user=membership.user, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

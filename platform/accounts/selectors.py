"""Reads of accounts: which teams a user belongs to, with which role, and their tokens."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, OuterRef, QuerySet, Subquery

from accounts.models import ApiToken, Membership, Role, Team


def teams_for_user(user: Any) -> QuerySet[Team]:
    """Teams ``user`` belongs to, each annotated with ``role`` (the caller's) and ``member_count``."""
    if not getattr(user, "is_authenticated", False):
        return Team.objects.none()
    role = Membership.objects.filter(team=OuterRef("pk"), user=user).values("role")[:1]
    return (
        Team.objects.filter(memberships__user=user)
        .annotate(role=Subquery(role), member_count=Count("memberships", distinct=True))
        .order_by("name")
    )


def teams_with_role(user: Any) -> list[Team]:
    """Teams ``user`` belongs to, by name, each with ``role`` (the caller's) set: one join, without the
    member count and role subquery of :func:`teams_for_user`, for the submit path that only needs a role."""
    if not getattr(user, "is_authenticated", False):
        return []
    teams = []
    for membership in Membership.objects.filter(user=user).select_related("team").order_by("team__name"):
        team = membership.team
        team.role = membership.role  # type: ignore[attr-defined]
        teams.append(team)
    return teams


def team_ids_for_user(user: Any) -> list[int]:
    if not getattr(user, "is_authenticated", False):
        return []
    return list(Membership.objects.filter(user=user).values_list("team_id", flat=True))


def role_of(*, user: Any, team: Team | int) -> str | None:
    """The role of ``user`` in ``team`` ("owner", "member", "viewer"), or None for outsiders."""
    if not getattr(user, "is_authenticated", False):
        return None
    team_id = team.pk if isinstance(team, Team) else team
    return Membership.objects.filter(user=user, team_id=team_id).values_list("role", flat=True).first()


def can_write(role: str | None) -> bool:
    return role in (Role.OWNER, Role.MEMBER)


def team_members(*, team: Team) -> QuerySet[Membership]:
    return Membership.objects.filter(team=team).select_related("user").order_by("user__username")


def tokens_for_user(*, user: Any) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")

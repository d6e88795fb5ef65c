"""Routes of the accounts API (mounted under /api/v1/; trailing slashes optional)."""

from django.urls import re_path

from accounts.api import (
    TeamDetailView,
    TeamListView,
    TeamMembersView,
    TeamMemberView,
    TokenDetailView,
    TokenListView,
    TokenView,
)

urlpatterns: list = [
    re_path(r"^auth/token/?$", TokenView.as_view(), name="auth-token"),
    re_path(r"^auth/tokens/?$", TokenListView.as_view(), name="auth-token-list"),
    re_path(r"^auth/tokens/(?P<token_id>[0-9]+)/?$", TokenDetailView.as_view(), name="auth-token-detail"),
    re_path(r"^teams/?$", TeamListView.as_view(), name="team-list"),
    re_path(r"^teams/(?P<team_id>[0-9]+)/?$", TeamDetailView.as_view(), name="team-detail"),
    re_path(r"^teams/(?P<team_id>[0-9]+)/members/?$", TeamMembersView.as_view(), name="team-members"),
    re_path(
        r"^teams/(?P<team_id>[0-9]+)/members/(?P<user_id>[0-9]+)/?$",
        TeamMemberView.as_view(),
        name="team-member",
    ),
]

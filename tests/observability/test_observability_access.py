"""Who may read the history and the usage reports (the personas of tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

SIGNED_IN = ("owner", "member", "viewer", "outsider")


@pytest.mark.parametrize("persona", [*SIGNED_IN, "anonymous"])
def test_the_cluster_history_is_for_every_signed_in_user(persona: str, personas, api_client_for) -> None:
    response = api_client_for(personas[persona]).get("/api/v1/cluster/history/", {"range": "1h"})
    assert response.status_code == (401 if persona == "anonymous" else 200)


@pytest.mark.parametrize(
    ("persona", "status"),
    [("owner", 200), ("member", 200), ("viewer", 200), ("outsider", 404), ("anonymous", 401)],
)
def test_a_teams_usage_is_for_its_members_only(persona: str, status: int, personas, api_client_for) -> None:
    response = api_client_for(personas[persona]).get("/api/v1/usage/", {"team": "vision", "group_by": "user"})
    assert response.status_code == status
    if status != 200:
        assert set(response.json()) == {"message", "code", "extra"}


def test_quota_admins_see_every_team_and_members_only_theirs(
    personas, quota_admin, api_client_for, other_team: Any
) -> None:
    from observability import api

    assert api._visible_team_slugs(quota_admin) is None
    assert api._visible_team_slugs(personas["outsider"]) == ["speech"]
    assert api_client_for(quota_admin).get("/api/v1/usage/", {"team": "speech"}).status_code == 200

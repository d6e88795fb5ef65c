"""The access matrix of every REST endpoint for the personas owner, member, viewer, outsider and
anonymous. Outsiders never learn that another team's objects exist (404); viewers read but may not
write (403); anonymous callers must authenticate (401); every refusal has the one error shape."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from accounts.models import ApiToken
from jobs.models import Job

PERSONAS = ("owner", "member", "viewer", "outsider", "anonymous")


def _statuses(owner: int, member: int, viewer: int, outsider: int, anonymous: int) -> dict[str, int]:
    return dict(zip(PERSONAS, (owner, member, viewer, outsider, anonymous), strict=True))


READ_TEAM = _statuses(200, 200, 200, 404, 401)
READ_ANY = _statuses(200, 200, 200, 200, 401)
WRITE_JOB = _statuses(201, 201, 403, 404, 401)

# (id, method, path template, body, expected status per persona). {job}, {team}, {image},
# {viewer_id} and {member_token} are filled from the world below: a job submitted by `member` in team `vision`.
MATRIX: list[tuple[str, str, str, Any, dict[str, int]]] = [
    ("health", "get", "/api/v1/health/", None, _statuses(200, 200, 200, 200, 200)),
    ("schema", "get", "/api/schema/", None, _statuses(200, 200, 200, 200, 200)),
    ("docs", "get", "/api/docs/", None, _statuses(200, 200, 200, 200, 200)),
    ("job-list", "get", "/api/v1/jobs/", None, READ_ANY),
    (
        "job-create",
        "post",
        "/api/v1/jobs/",
        {"team": "{team}", "image": "{image}", "command": ["python", "t.py"], "gpu_milli": 250},
        # An outsider naming a team they are not in gets the same 400 as for a team that does not exist.
        _statuses(201, 201, 403, 400, 401),
    ),
    ("job-detail", "get", "/api/v1/jobs/{job}/", None, READ_TEAM),
    ("job-events", "get", "/api/v1/jobs/{job}/events/", None, READ_TEAM),
    ("job-logs", "get", "/api/v1/jobs/{job}/logs/", None, READ_TEAM),
    ("job-cancel", "post", "/api/v1/jobs/{job}/cancel/", None, _statuses(200, 200, 403, 404, 401)),
    ("job-clone", "post", "/api/v1/jobs/{job}/clone/", None, WRITE_JOB),
    ("team-list", "get", "/api/v1/teams/", None, READ_ANY),
    ("team-detail", "get", "/api/v1/teams/{team}/", None, READ_TEAM),
    ("team-members", "get", "/api/v1/teams/{team}/members/", None, READ_TEAM),
    (
        "member-add",
        "post",
        "/api/v1/teams/{team}/members/",
        {"username": "newbie", "role": "viewer"},
        _statuses(201, 403, 403, 404, 401),
    ),
    (
        "member-role",
        "patch",
        "/api/v1/teams/{team}/members/{viewer_id}/",
        {"role": "member"},
        _statuses(200, 403, 403, 404, 401),
    ),
    (
        "member-remove",
        "delete",
        "/api/v1/teams/{team}/members/{viewer_id}/",
        None,
        _statuses(204, 403, 403, 404, 401),
    ),
    ("quota-list", "get", "/api/v1/quotas/", None, READ_ANY),
    ("quota-detail", "get", "/api/v1/quotas/{team}/", None, READ_TEAM),
    (
        "quota-update",
        "patch",
        "/api/v1/quotas/{team}/",
        {"max_gpu_milli": 16000},
        _statuses(403, 403, 403, 404, 401),
    ),
    (
        "quota-grant",
        "post",
        "/api/v1/quotas/{team}/grants/",
        {"gpu_hours": 5},
        _statuses(403, 403, 403, 404, 401),
    ),
    ("image-list", "get", "/api/v1/images/", None, READ_ANY),
    ("image-detail", "get", "/api/v1/images/{image}/", None, READ_ANY),
    ("cluster", "get", "/api/v1/cluster/", None, READ_ANY),
    ("token-list", "get", "/api/v1/auth/tokens/", None, READ_ANY),
    (
        "token-revoke-one",
        "delete",
        "/api/v1/auth/tokens/{member_token}/",
        None,
        _statuses(404, 204, 404, 404, 401),
    ),
    ("token-revoke-current", "delete", "/api/v1/auth/token/", None, _statuses(204, 204, 204, 204, 401)),
    (
        "token-create",
        "post",
        "/api/v1/auth/token/",
        {"username": "{username}", "password": "{password}"},
        # Anonymous has no account: its attempt uses a wrong password.
        _statuses(201, 201, 201, 201, 400),
    ),
]

CASES = [
    pytest.param(method, path, body, persona, expected[persona], id=f"{name}-{persona}")
    for name, method, path, body, expected in MATRIX
    for persona in PERSONAS
]


def _fill(value: Any, world: dict[str, Any]) -> Any:
    if isinstance(value, str):
        for key, replacement in world.items():
            if value == "{" + key + "}" and not isinstance(replacement, str):
                return replacement
            value = value.replace("{" + key + "}", str(replacement))
        return value
    if isinstance(value, dict):
        return {k: _fill(v, world) for k, v in value.items()}
    return value


@pytest.fixture(autouse=True)
def _isolated_cluster(settings, tmp_path) -> None:
    # The simulated backend keeps its state in a file: give every test its own.
    settings.SIM_STATE_PATH = str(tmp_path / "cluster.json")


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "body", "persona", "expected"), CASES)
def test_access_matrix(
    method, path, body, persona, expected, personas, team, image, submit_job, api_client_for
):
    user = personas[persona]
    job = submit_job(personas["member"])
    client = api_client_for(user)
    User.objects.create_user("newbie")
    member_token = ApiToken.objects.create(user=personas["member"], key_hash="x" * 64, prefix="gpu_test")
    world = {
        "job": job.pk,
        "team": team.pk,
        "image": image.pk,
        "member_token": member_token.pk,
        "viewer_id": personas["viewer"].pk,
        "username": user.username if user else "nobody",
        "password": f"{user.username}-password-1" if user else "wrong",
    }

    response = getattr(client, method)(_fill(path, world), _fill(body, world), format="json")

    assert response.status_code == expected, response.content[:500]
    if response.status_code >= 400:
        assert set(response.json()) == {"message", "code", "extra"}


@pytest.mark.django_db
def test_an_outsider_lists_no_job_of_another_team(personas, submit_job, api_client_for) -> None:
    submit_job(personas["member"])

    response = api_client_for(personas["outsider"]).get("/api/v1/jobs/")

    assert response.json()["count"] == 0
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_a_quota_admin_may_change_a_quota_they_are_not_a_member_of(quota_admin, team, api_client_for) -> None:
    response = api_client_for(quota_admin).patch(
        f"/api/v1/quotas/{team.pk}/", {"max_gpu_milli": 16000, "per_user_gpu_milli": 4000}, format="json"
    )

    assert response.status_code == 200, response.content
    assert (response.json()["max_gpu_milli"], response.json()["per_user_gpu_milli"]) == (16000, 4000)
    team.quota.refresh_from_db()
    assert team.quota.max_gpu_milli == 16000

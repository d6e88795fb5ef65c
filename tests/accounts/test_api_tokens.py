"""API tokens: created from a username and password, shown once and stored hashed; they authenticate
until they expire or are revoked."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken, hash_token
from accounts.services import token_create, token_revoke

pytestmark = pytest.mark.django_db


def _client(raw: str, keyword: str = "Token") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{keyword} {raw}")
    return client


def test_a_token_is_created_from_a_username_and_password_and_shown_once(member, settings) -> None:
    settings.API_TOKEN_TTL_DAYS = 30

    response = APIClient().post(
        "/api/v1/auth/token/",
        {"username": "max", "password": "max-password-1", "name": "laptop"},
        format="json",
    )

    assert response.status_code == 201
    body = response.json()
    raw = body["token"]
    stored = ApiToken.objects.get(pk=body["id"])
    assert stored.key_hash == hash_token(raw) != raw
    assert raw not in {stored.key_hash, stored.prefix, stored.name}
    assert (stored.name, stored.prefix) == ("laptop", raw[:8])
    assert timedelta(days=29, hours=23) < stored.expires_at - timezone.now() <= timedelta(days=30)
    listed = _client(raw).get("/api/v1/auth/tokens/").json()
    assert [t["id"] for t in listed] == [stored.pk]
    assert "token" not in listed[0]


def test_wrong_credentials_get_one_message_for_every_cause(member) -> None:
    wrong_password = APIClient().post(
        "/api/v1/auth/token/", {"username": "max", "password": "nope"}, format="json"
    )
    no_such_user = APIClient().post(
        "/api/v1/auth/token/", {"username": "ghost", "password": "x"}, format="json"
    )

    assert wrong_password.status_code == no_such_user.status_code == 400
    assert wrong_password.json() == no_such_user.json()
    assert ApiToken.objects.count() == 0


def test_an_inactive_user_gets_no_token(member) -> None:
    member.is_active = False
    member.save()

    response = APIClient().post(
        "/api/v1/auth/token/", {"username": "max", "password": "max-password-1"}, format="json"
    )

    assert response.status_code == 400


@pytest.mark.parametrize("keyword", ["Token", "Bearer"])
def test_a_token_authenticates_and_records_its_last_use(keyword, member) -> None:
    token, raw = token_create(user=member)

    response = _client(raw, keyword).get("/api/v1/teams/")

    assert response.status_code == 200
    assert [team["slug"] for team in response.json()] == ["vision"]
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_an_expired_token_is_refused(member) -> None:
    token, raw = token_create(user=member)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    response = _client(raw).get("/api/v1/teams/")

    assert response.status_code == 401
    assert response.json()["message"] == "Invalid, expired or revoked token."


def test_a_revoked_token_is_refused(member) -> None:
    token, raw = token_create(user=member)
    token_revoke(token=token, actor=member)

    assert _client(raw).get("/api/v1/teams/").status_code == 401


def test_a_made_up_token_is_refused(member) -> None:
    assert _client("gpu_not-a-real-token").get("/api/v1/teams/").status_code == 401


def test_a_zero_ttl_means_the_token_never_expires(member, settings) -> None:
    settings.API_TOKEN_TTL_DAYS = 0
    token, _ = token_create(user=member)
    assert token.expires_at is None


def test_signing_out_revokes_the_token_of_the_request(member) -> None:
    token, raw = token_create(user=member)
    other, other_raw = token_create(user=member, name="other")

    assert _client(raw).delete("/api/v1/auth/token/").status_code == 204

    token.refresh_from_db()
    assert token.revoked_at is not None
    assert _client(raw).get("/api/v1/teams/").status_code == 401
    assert _client(other_raw).get("/api/v1/teams/").status_code == 200


def test_a_user_revokes_one_of_their_tokens_by_id(member) -> None:
    _, raw = token_create(user=member)
    lost, lost_raw = token_create(user=member, name="lost laptop")

    assert _client(raw).delete(f"/api/v1/auth/tokens/{lost.pk}/").status_code == 204
    assert _client(lost_raw).get("/api/v1/teams/").status_code == 401
    # Revoking again is harmless.
    assert _client(raw).delete(f"/api/v1/auth/tokens/{lost.pk}/").status_code == 204


def test_nobody_revokes_someone_elses_token(member, owner) -> None:
    theirs, their_raw = token_create(user=owner)
    _, raw = token_create(user=member)

    assert _client(raw).delete(f"/api/v1/auth/tokens/{theirs.pk}/").status_code == 404
    with pytest.raises(Exception, match="own tokens"):
        token_revoke(token=theirs, actor=member)
    assert _client(their_raw).get("/api/v1/teams/").status_code == 200


def test_a_stale_token_header_does_not_block_signing_in(member) -> None:
    response = _client("gpu_stale").post(
        "/api/v1/auth/token/", {"username": "max", "password": "max-password-1"}, format="json"
    )
    assert response.status_code == 201


def test_session_authentication_works_for_the_portal(member) -> None:
    client = APIClient()
    assert client.login(username="max", password="max-password-1")

    assert client.get("/api/v1/teams/").status_code == 200

"""A token's last use is recorded at most once a minute: reads do not each write a row."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.authentication import LAST_USED_RESOLUTION
from accounts.models import ApiToken
from accounts.services import token_create

pytestmark = pytest.mark.django_db


def _updates_of_tokens(queries: list[dict]) -> int:
    return sum(1 for q in queries if q["sql"].startswith("UPDATE") and "accounts_apitoken" in q["sql"])


def test_the_first_request_records_the_use_and_the_next_ones_within_a_minute_write_nothing(member) -> None:
    token, raw = token_create(user=member)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")

    with CaptureQueriesContext(connection) as first:
        assert client.get("/api/v1/teams/").status_code == 200
    token.refresh_from_db()
    recorded = token.last_used_at
    with CaptureQueriesContext(connection) as later:
        for _ in range(3):
            assert client.get("/api/v1/teams/").status_code == 200
    token.refresh_from_db()

    assert _updates_of_tokens(first.captured_queries) == 1
    assert recorded is not None
    assert _updates_of_tokens(later.captured_queries) == 0
    assert token.last_used_at == recorded


def test_a_use_after_the_resolution_is_recorded_again(member) -> None:
    token, raw = token_create(user=member)
    stale = timezone.now() - LAST_USED_RESOLUTION - timedelta(seconds=1)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=stale)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")

    assert client.get("/api/v1/teams/").status_code == 200
    token.refresh_from_db()

    assert token.last_used_at > stale + LAST_USED_RESOLUTION

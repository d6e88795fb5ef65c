"""Bearer-token authentication against hashed, expiring, revocable API tokens."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import authentication, exceptions

from accounts.models import ApiToken, hash_token

# How stale a token's ``last_used_at`` may get. Writing it on every request made each GET a write (an
# UPDATE and a commit, on PostgreSQL a WAL flush) under the API's busiest path; the token list shows it
# to the minute at best, so one write a minute per token says the same.
LAST_USED_RESOLUTION = timedelta(seconds=60)


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Token <key>`` (``Bearer`` is accepted too)."""

    keywords = ("token", "bearer")

    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower().decode(errors="replace") not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: expected 'Token <key>'.")
        raw = header[1].decode(errors="replace")
        token = ApiToken.objects.select_related("user").filter(key_hash=hash_token(raw)).first()
        if token is None or not token.is_active or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        return "Token"

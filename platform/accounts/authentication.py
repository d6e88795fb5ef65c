"""Bearer-token authentication against hashed, expiring, revocable API tokens."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import authentication, exceptions

from accounts.models import ApiToken, hash_token


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
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        return "Token"

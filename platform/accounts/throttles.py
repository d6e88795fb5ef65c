"""Rate limits and login lockouts (state in the Django cache: Redis when REDIS_URL is set).

Three limits, each answered with 429 and ``Retry-After``:

- **login failures** (token endpoint, portal and admin login): after
  ``LOGIN_FAILURES_PER_USERNAME`` failed logins for one username, or ``LOGIN_FAILURES_PER_ADDRESS``
  from one client address, within ``LOGIN_FAILURE_WINDOW_SECONDS``, further attempts are refused until
  the window that the first failure opened ends, even with the right password: a password guesser
  learns nothing while locked out. The per-username lock can be triggered by anyone who knows a
  username; it lasts one window at most, and the per-address limit is what stops one client spraying
  many usernames. A successful login clears its username's count, never its address's (else a guesser
  could interleave logins to an account of their own).
- ``auth``: requests to the token endpoint per client address (``API_THROTTLE_RATES["auth"]``);
- ``write``: unsafe API requests (POST, PUT, PATCH, DELETE) per signed-in user
  (``API_THROTTLE_RATES["write"]``).

Client addresses are ``REMOTE_ADDR``, or the ``X-Forwarded-For`` entry ``NUM_PROXIES`` from the end
when the platform runs behind that many trusted proxies (DRF's rule): a client cannot pick its own
address by sending the header.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import BaseCache, caches
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def throttle_cache() -> BaseCache:
    return caches[getattr(settings, "THROTTLE_CACHE", "default")]


def client_address(request: Any) -> str:
    """The caller's address by DRF's rule (see the module docstring); works on Django and DRF requests."""
    return BaseThrottle().get_ident(request)


def _digest(text: str) -> str:
    # Usernames are user input of any length and alphabet; cache keys must be short and safe.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]


@dataclass(frozen=True)
class LoginFailures:
    """Fixed-window counters of failed logins per username and per client address."""

    per_username: int
    per_address: int
    window_s: int

    def _keys(self, username: str, address: str) -> list[tuple[str, int]]:
        keys = [(f"throttle:login:addr:{_digest(address)}", self.per_address)]
        if username:
            keys.append((f"throttle:login:user:{_digest(username.casefold())}", self.per_username))
        return keys

    def locked_for(self, *, username: str, address: str) -> int | None:
        """Seconds until a login for ``username`` from ``address`` may be tried again, or None."""
        cache = throttle_cache()
        now = time.time()
        waits = []
        for key, limit in self._keys(username, address):
            if limit > 0 and int(cache.get(key, 0)) >= limit:
                opened = float(cache.get(f"{key}:opened", now))
                waits.append(max(1, math.ceil(opened + self.window_s - now)))
        return max(waits) if waits else None

    def record_failure(self, *, username: str, address: str) -> None:
        cache = throttle_cache()
        for key, _limit in self._keys(username, address):
            # add() is a no-op when the window is already open, so the first failure fixes its end.
            cache.add(f"{key}:opened", time.time(), self.window_s)
            cache.add(key, 0, self.window_s)
            try:
                cache.incr(key)  # atomic on Redis: parallel guesses are all counted
            except ValueError:  # expired between add() and incr(): this failure opens a new window
                cache.set(key, 1, self.window_s)

    def record_success(self, *, username: str) -> None:
        if username:
            key = f"throttle:login:user:{_digest(username.casefold())}"
            throttle_cache().delete_many([key, f"{key}:opened"])


def login_failures() -> LoginFailures:
    return LoginFailures(
        per_username=int(getattr(settings, "LOGIN_FAILURES_PER_USERNAME", 5)),
        per_address=int(getattr(settings, "LOGIN_FAILURES_PER_ADDRESS", 50)),
        window_s=int(getattr(settings, "LOGIN_FAILURE_WINDOW_SECONDS", 900)),
    )


def submitted_username(data: Any) -> str:
    """The username a login request carries, or "" (a missing or non-string value)."""
    try:
        value = data.get("username", "")
    except AttributeError:  # a JSON list or scalar body: the serializer answers 400 for it
        return ""
    return value[:150] if isinstance(value, str) else ""


class LoginLockoutThrottle(BaseThrottle):
    """Refuses login attempts while the username or the client address is locked out."""

    def allow_request(self, request: Request, view: Any) -> bool:
        self._wait: int | None = None
        if request.method != "POST":
            return True
        self._wait = login_failures().locked_for(
            username=submitted_username(request.data), address=client_address(request)
        )
        return self._wait is None

    def wait(self) -> float | None:
        return self._wait


class _ConfiguredRateThrottle(SimpleRateThrottle):
    """SimpleRateThrottle whose rate comes from ``settings.API_THROTTLE_RATES[scope]`` read on each
    request (DRF's own copy is frozen at import, which override_settings cannot reach); a missing or
    empty rate turns the throttle off."""

    @property  # type: ignore[override]
    def cache(self) -> BaseCache:
        return throttle_cache()

    def get_rate(self) -> str | None:
        rates = getattr(settings, "API_THROTTLE_RATES", {})
        return rates.get(self.scope) or None

    def allow_request(self, request: Request, view: Any) -> bool:
        # SimpleRateThrottle parses the rate once, in __init__; parse it again per request.
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)  # type: ignore[assignment]
        return super().allow_request(request, view)


class AuthRateThrottle(_ConfiguredRateThrottle):
    """Requests to the token endpoint per client address."""

    scope = "auth"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": _digest(self.get_ident(request))}


class WriteRateThrottle(_ConfiguredRateThrottle):
    """Unsafe API requests per signed-in user; reads and anonymous requests are not counted."""

    scope = "write"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if request.method in SAFE_METHODS or not request.user or not request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}

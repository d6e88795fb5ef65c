"""Configuration from environment variables. Malformed values fail loudly at start-up."""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse


class ConfigError(RuntimeError):
    pass


def env_str(name: str, default: str | None = None) -> str:
    value = os.environ.get(name)
    if value is None or value == "":
        if default is None:
            raise ConfigError(f"environment variable {name} is required")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"environment variable {name}={raw!r} is not a boolean (use true/false)")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from None


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"environment variable {name}={raw!r} is not a number") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(url: str, *, pool_max_size: int = 0) -> dict[str, object]:
    """Django DATABASES entry from ``postgres://user:pass@host:port/name`` or ``sqlite:///path``.

    ``pool_max_size`` > 0 gives PostgreSQL a connection pool of that many connections per process
    (Django's ``pool`` option, psycopg_pool). Under ASGI (gunicorn's uvicorn worker) every request runs
    in a thread of its own, so Django's per-thread connections cannot persist (``CONN_MAX_AGE``) and
    each request would open one: a fork of a server backend that rebuilds its catalogue caches, 10-30
    ms of the server's CPU per request (docs/benchmarks.md, "The API under load"). A pool hands the
    same connections from request to request; a request finds one closed when it ends (rolled back if
    it was left in a transaction). SQLite opens a file: no pool.
    """
    parsed = urlparse(url)
    if parsed.scheme in {"postgres", "postgresql", "pgsql"}:
        if not parsed.path.strip("/"):
            raise ConfigError(f"DATABASE_URL {url!r} names no database")
        entry: dict[str, object] = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")),
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            # Django refuses persistent connections beside a pool; without one they are per request.
            "CONN_MAX_AGE": 0,
        }
        if pool_max_size > 0:
            # One idle connection kept per process; more opened under concurrency, closed again after
            # 10 idle minutes (psycopg_pool's max_idle). A request waits at most `timeout` seconds for
            # one when all are in use, then fails (a 500) rather than queueing without end.
            entry["OPTIONS"] = {"pool": {"min_size": 1, "max_size": pool_max_size, "timeout": 30.0}}
        return entry
    if parsed.scheme == "sqlite":
        path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else parsed.path
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path or ":memory:"}
    raise ConfigError(
        f"DATABASE_URL {url!r}: unsupported scheme {parsed.scheme!r} (use postgres:// or sqlite:///)"
    )

"""Heartbeats of the periodic work (cycle, sync, reconcile): the dead-man switch behind the health check.

Each kind of work records when it last completed (``beat``); ``/api/v1/health`` reports the ages and
turns 503 when one is older than its threshold (``HEALTH_MAX_AGE_SECONDS``). The stamps live in the
cache, shared by web and workers (Redis, or the file cache of the embedded default). A stamp that is
missing (a fresh start, or Redis restarted empty) counts from the moment this process first looked,
so a platform that never ran a cycle still trips the alarm one threshold after it started.
"""

from __future__ import annotations

import contextlib
import time

from django.core.cache import cache

KINDS = ("cycle", "sync", "reconcile")
PREFIX = "gpu-platform:heartbeat:"
_first_seen = time.time()


def stamp_key(kind: str) -> str:
    """The cache key of ``kind``'s heartbeat on this database's platform."""
    from jobs.lease import scoped_key

    return scoped_key(f"{PREFIX}{kind}")


def beat(kind: str, *, now: float | None = None) -> None:
    # A missed stamp only makes the health check more cautious.
    with contextlib.suppress(Exception):
        cache.set(stamp_key(kind), time.time() if now is None else now, timeout=None)


def last(kind: str) -> float | None:
    try:
        value = cache.get(stamp_key(kind))
    except Exception:  # noqa: BLE001
        return None
    return float(value) if value is not None else None


def ages(*, now: float | None = None) -> dict[str, float | None]:
    """Seconds since each kind last completed; None when never seen by the cache."""
    now = time.time() if now is None else now
    out: dict[str, float | None] = {}
    for kind in KINDS:
        stamp = last(kind)
        out[kind] = None if stamp is None else max(0.0, now - stamp)
    return out


def stale(*, max_age_s: float, now: float | None = None) -> dict[str, float]:
    """The kinds older than ``max_age_s`` (missing ones counted from this process's start)."""
    now = time.time() if now is None else now
    out: dict[str, float] = {}
    for kind, age in ages(now=now).items():
        effective = (now - _first_seen) if age is None else age
        if effective > max_age_s:
            out[kind] = effective
    return out

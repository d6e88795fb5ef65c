"""``GET /api/v1/health``: is the platform able to serve? Anonymous, cheap, never raises.

Besides the database and the broker it is a dead-man switch for the periodic work: it reports the age
of the last scheduling cycle, status sync and reconcile pass (``jobs.heartbeat``) and answers 503 when
one is older than ``HEALTH_MAX_AGE_SECONDS``: a stalled worker, a dead beat or a lease nobody can take
shows here, not only in a queue nobody watches. See docs/operations.md ("Operations: alerts").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


def _database_status() -> dict[str, Any]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return {"ok": True, "engine": connection.vendor}
    except Exception as exc:  # noqa: BLE001  (health reports, never raises)
        return {"ok": False, "engine": connection.vendor, "error": str(exc)[:200]}


def _broker_status() -> dict[str, Any]:
    url = settings.CELERY_BROKER_URL
    try:
        if url.startswith(("redis://", "rediss://")):
            import redis

            from config.redis_pool import SharedConnectionPool

            # The process's pool: a probe every few seconds need not open a connection each time.
            pool = SharedConnectionPool.from_url(url, socket_connect_timeout=1, socket_timeout=1)
            redis.Redis(connection_pool=pool).ping()
            return {"ok": True, "kind": "redis"}
        if url.startswith("filesystem://"):
            folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])  # type: ignore[arg-type]
            folder.mkdir(parents=True, exist_ok=True)
            return {"ok": True, "kind": "filesystem"}
        return {"ok": True, "kind": url.split("://", 1)[0], "checked": False}
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "kind": url.split("://", 1)[0], "error": str(exc)[:200]}


def _work_status() -> dict[str, Any]:
    from jobs import heartbeat

    threshold = float(settings.HEALTH_MAX_AGE_SECONDS)
    ages = heartbeat.ages()
    # 0 turns the switch off (the test settings do: in-process test runs have no beat).
    stale = heartbeat.stale(max_age_s=threshold) if threshold > 0 else {}
    return {
        "ok": not stale,
        "max_age_seconds": threshold,
        "age_seconds": {k: (round(v, 1) if v is not None else None) for k, v in ages.items()},
        "stale": sorted(stale),
    }


class HealthView(APIView):
    """``GET /api/v1/health``: anonymous. 200 when the database and the broker answer and the periodic
    work (cycle, sync, reconcile) ran recently, else 503."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    @extend_schema(
        responses={
            200: inline_serializer(
                "Health",
                {
                    "status": serializers.CharField(),
                    "database": serializers.DictField(),
                    "broker": serializers.DictField(),
                    "work": serializers.DictField(),
                },
            ),
            503: inline_serializer(
                "HealthDegraded",
                {
                    "status": serializers.CharField(),
                    "database": serializers.DictField(),
                    "broker": serializers.DictField(),
                    "work": serializers.DictField(),
                },
            ),
        },
        auth=[],
    )
    def get(self, request: Request) -> Response:
        database = _database_status()
        broker = _broker_status()
        work = _work_status()
        healthy = database["ok"] and broker["ok"] and work["ok"]
        return Response(
            {"status": "ok" if healthy else "degraded", "database": database, "broker": broker, "work": work},
            status=status.HTTP_200_OK if healthy else status.HTTP_503_SERVICE_UNAVAILABLE,
        )

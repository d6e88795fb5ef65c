"""``GET /api/v1/health``: is the platform able to serve? Anonymous, cheap, never raises."""

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

            redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping()
            return {"ok": True, "kind": "redis"}
        if url.startswith("filesystem://"):
            folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])  # type: ignore[arg-type]
            folder.mkdir(parents=True, exist_ok=True)
            return {"ok": True, "kind": "filesystem"}
        return {"ok": True, "kind": url.split("://", 1)[0], "checked": False}
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "kind": url.split("://", 1)[0], "error": str(exc)[:200]}


class HealthView(APIView):
    """``GET /api/v1/health``: anonymous. 200 when the database and the broker answer, else 503."""

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
                },
            ),
            503: inline_serializer(
                "HealthDegraded",
                {
                    "status": serializers.CharField(),
                    "database": serializers.DictField(),
                    "broker": serializers.DictField(),
                },
            ),
        },
        auth=[],
    )
    def get(self, request: Request) -> Response:
        database = _database_status()
        broker = _broker_status()
        healthy = database["ok"] and broker["ok"]
        return Response(
            {"status": "ok" if healthy else "degraded", "database": database, "broker": broker},
            status=status.HTTP_200_OK if healthy else status.HTTP_503_SERVICE_UNAVAILABLE,
        )

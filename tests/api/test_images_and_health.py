"""The read-only image catalog and the health endpoint."""

from __future__ import annotations

import pytest

from images.models import JobImage

pytestmark = pytest.mark.django_db


def test_the_catalog_lists_active_images_with_their_reference(member, image, api_client_for) -> None:
    JobImage.objects.create(name="tensorflow", tag="2.15", is_active=False)

    body = api_client_for(member).get("/api/v1/images/").json()

    assert body["count"] == 1
    assert body["results"][0]["reference"] == "pytorch:2.4"
    retired = api_client_for(member).get("/api/v1/images/?is_active=false").json()
    assert [i["name"] for i in retired["results"]] == ["tensorflow"]


def test_the_catalog_is_read_only(member, image, api_client_for) -> None:
    client = api_client_for(member)

    assert client.post("/api/v1/images/", {"name": "x"}, format="json").status_code == 405
    assert client.delete(f"/api/v1/images/{image.pk}/").status_code == 405
    assert JobImage.objects.count() == 1


def test_health_reports_the_database_and_the_broker(client) -> None:
    body = client.get("/api/v1/health").json()

    assert body["status"] == "ok"
    assert body["database"]["ok"] is True
    assert body["broker"]["ok"] is True


def test_health_is_503_when_the_broker_is_unreachable(client, settings) -> None:
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"

    response = client.get("/api/v1/health/")

    assert response.status_code == 503
    assert response.json()["status"] == "degraded"
    assert response.json()["broker"]["ok"] is False


def test_health_ignores_a_bad_token(client) -> None:
    assert client.get("/api/v1/health/", HTTP_AUTHORIZATION="Token nonsense").status_code == 200

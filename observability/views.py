"""``GET /metrics``: the Prometheus text format, behind the access check of observability.access."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from observability.access import metrics_access
from observability.registry import scrape_registry

REFUSED = {
    401: "A bearer token is required: Authorization: Bearer <METRICS_TOKEN>.\n",
    403: "Metrics are served to loopback clients and METRICS_ALLOWED_NETWORKS only.\n",
}


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    allowed, status = metrics_access(request)
    if not allowed:
        response = HttpResponse(REFUSED[status], status=status, content_type="text/plain; charset=utf-8")
        if status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_LATEST)

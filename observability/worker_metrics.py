"""Metrics of a Celery worker that runs apart from the web (its own pod): with CELERY_METRICS_PORT
set, the worker serves its counters (all its pool processes' in multiprocess mode) on that port.

Only the in-process metrics are served here (cycle durations, placements, preemptions); the
state metrics come from the web's /metrics alone, so that no series is exported twice.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from celery.signals import worker_ready
from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.multiprocess import MultiProcessCollector

logger = logging.getLogger(__name__)


@worker_ready.connect
def serve_worker_metrics(**_: Any) -> None:
    port = os.environ.get("CELERY_METRICS_PORT", "").strip()
    if not port:
        return
    registry: CollectorRegistry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    start_http_server(int(port), addr=os.environ.get("CELERY_METRICS_ADDR", "0.0.0.0"), registry=registry)  # noqa: S104
    logger.info("worker metrics on port %s", port)

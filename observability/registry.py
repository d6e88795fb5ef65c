"""The registry ``/metrics`` renders: this process's metrics, or all processes' in multiprocess mode,
plus the scrape-time collector."""

from __future__ import annotations

import os
from collections.abc import Iterator

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

# Imported for its side effect: the counted metrics are registered (and exported at zero) in every
# process that serves /metrics, also before its first scheduling cycle.
from observability import metrics  # noqa: F401
from observability.collector import PlatformCollector

_collector = PlatformCollector()


def multiprocess_dir() -> str:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


def scrape_registry() -> CollectorRegistry:
    """A registry for one scrape. In multiprocess mode the default registry holds only this worker's
    samples, so a fresh one reads every process's files instead (prometheus_client's documented way)."""
    if multiprocess_dir():
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    else:
        registry = CollectorRegistry()
        registry.register(_Default())
    registry.register(_collector)
    return registry


class _Default(Collector):
    """The default registry's collectors, passed through (process, platform, GC and ours)."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()

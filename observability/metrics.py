"""Metrics counted where things happen (the scheduling cycle), kept by prometheus_client.

Under gunicorn and Celery each process writes its samples to ``PROMETHEUS_MULTIPROC_DIR`` (when set)
and ``/metrics`` adds them up (docs/observability.md, "Several processes"); without it they live in
this process's default registry. Everything that describes the database or the cluster *now* is
computed at scrape time instead (observability.collector), so it can never drift.

Labels are bounded: a policy rule name, never a job or user.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Histogram

CYCLE_SECONDS = Histogram(
    "gpu_platform_scheduling_cycle_duration_seconds",
    "Wall time of one pass of the scheduling cycle under the lease (a rerun is a pass of its own)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)
PLACEMENTS = Counter("gpu_platform_placements_total", "Jobs placed by scheduling cycles (QUEUED -> ADMITTED)")
PREEMPTIONS = Counter(
    "gpu_platform_preemptions_total",
    "Running jobs asked to stop for another job (RUNNING -> PREEMPTING), migrations included, by rule",
    ["rule"],
)
MIGRATIONS = Counter(
    "gpu_platform_migrations_total",
    "Preemptions whose next placement was planned in the same cycle",
    ["rule"],
)
RECLAIMS = Counter(
    "gpu_platform_reclaims_total", "Preemptions that gave a team's guaranteed GPUs back to it (rule reclaim*)"
)


@contextmanager
def cycle_timer() -> Iterator[None]:
    """Times the block into the cycle-duration histogram (also when it raises)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        CYCLE_SECONDS.observe(time.perf_counter() - start)


def record_placements(count: int) -> None:
    if count > 0:
        PLACEMENTS.inc(count)


def record_preemption(*, rule: str, migration: bool) -> None:
    """One job moved RUNNING -> PREEMPTING by ``rule`` (a migration when its target is planned)."""
    rule = (rule or "unknown")[:40]
    PREEMPTIONS.labels(rule=rule).inc()
    if migration:
        MIGRATIONS.labels(rule=rule).inc()
    if rule.startswith("reclaim"):
        RECLAIMS.inc()

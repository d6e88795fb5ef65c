"""The folder where every process of the platform writes its metrics (prometheus_client's
multiprocess mode). It must be empty when the platform starts: files of processes from an earlier
run would be added to this run's counters."""

from __future__ import annotations

from pathlib import Path


def fresh_metrics_dir(path: Path) -> Path:
    """Create ``path`` if needed and delete the metric files of earlier runs in it."""
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):
        stale.unlink(missing_ok=True)
    return path

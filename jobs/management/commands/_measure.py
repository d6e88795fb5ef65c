"""What the benchmark commands share: percentiles, one latency summary, provenance, a child's environment.

A name starting with ``_`` is not a management command (Django skips it), so this is only imported.
"""

from __future__ import annotations

import os
import platform as host_platform
import statistics
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile; 0.0 for no values (a run that measured nothing reports zeros)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def latency_summary_ms(values: list[float]) -> dict[str, float]:
    """Seconds in, milliseconds out: the one shape every latency in the API benchmarks' JSON has."""
    return {
        "count": len(values),
        "p50_ms": round(percentile(values, 50) * 1000, 2),
        "p90_ms": round(percentile(values, 90) * 1000, 2),
        "p99_ms": round(percentile(values, 99) * 1000, 2),
        "max_ms": round(max(values) * 1000, 2) if values else 0.0,
    }


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=settings.BASE_DIR, capture_output=True, text=True)
    except OSError:
        return ""
    return done.stdout.strip()


def commit() -> str:
    return _git("rev-parse", "--short", "HEAD")


def provenance(loadavg_at_start: float) -> dict[str, object]:
    """Which code measured (commit; dirty when tracked files differ from it) on what box, how loaded:
    the load average is what other work took of the cores the numbers shared."""
    return {
        "commit": commit(),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "cpus": os.cpu_count(),
        "python": host_platform.python_version(),
        "loadavg_1m_at_start": round(loadavg_at_start, 2),
        "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
    }


def platform_env(var: Path, database_url: str = "", redis_url: str = "") -> dict[str, str]:
    """The environment of a child ``manage.py`` on a fresh ``var/`` with the simulated cluster: the
    embedded default unless a database (and broker) is named."""
    root = Path(settings.BASE_DIR)
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update({"DATABASE_URL": database_url} if database_url else {})
    env.update({"REDIS_URL": redis_url} if redis_url else {})
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.dev",
            "PYTHONPATH": os.pathsep.join([str(root / "platform"), str(root)]),
            "GPU_PLATFORM_VAR_DIR": str(var),
            "CLUSTER_BACKEND": "simulated",
            "SIM_STATE_PATH": str(var / "simulated-cluster.json"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def manage(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    """Run ``manage.py ARGS`` in a child with ``env``; its stdout, or a CommandError with its stderr's end."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise CommandError(f"manage.py {args[0]} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout

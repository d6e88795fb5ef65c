"""gunicorn's settings file (it reads ./gunicorn.conf.py by default): metrics of every worker process.

prometheus_client's multiprocess mode (docs/observability.md, "Several processes") needs
PROMETHEUS_MULTIPROC_DIR in the environment before a worker imports it, an empty folder at start and
dead workers marked. ``manage.py runplatform`` sets the variable for web and Celery workers alike
(one folder, so the web's /metrics also shows the workers' counters); a gunicorn started alone
(Docker, Kubernetes) gets a fresh folder of its own, removed again when it exits.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

_OWN_DIR = ""
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    _OWN_DIR = tempfile.mkdtemp(prefix="gpu-platform-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = _OWN_DIR


def child_exit(server: Any, worker: Any) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server: Any) -> None:
    if _OWN_DIR:
        shutil.rmtree(_OWN_DIR, ignore_errors=True)

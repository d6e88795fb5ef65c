"""A web process keeps the garbage collector off its start-up heap (config.web_process_gc).

Checked in a fresh interpreter that loads the ASGI entry point as gunicorn's worker does: the test
process's own collector state must not leak into, or out of, the rest of the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from config.web_process_gc import YOUNG_GENERATION_THRESHOLD

REPO_ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json, sys, weakref
import config.asgi

class Node:
    pass

# A reference cycle made after start-up must still be collected.
a, b = Node(), Node()
a.other, b.other = b, a
dead = weakref.ref(a)
del a, b
gc.collect()
print(json.dumps({
    "frozen": gc.get_freeze_count(),
    "threshold": gc.get_threshold(),
    "views_loaded_before_freeze": "jobs.api" in sys.modules,
    "cycle_collected": dead() is None,
    "gc_enabled": gc.isenabled(),
}))
"""


def _probe(module: str) -> dict[str, Any]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT / "platform"), str(REPO_ROOT)])
    done = subprocess.run(
        [sys.executable, "-c", PROBE.replace("config.asgi", module)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_asgi_entry_point_freezes_its_start_up_heap_and_still_collects_new_cycles() -> None:
    seen = _probe("config.asgi")

    # Django, DRF and every view module: far more than an interpreter holds on its own.
    assert seen["frozen"] > 50_000
    assert seen["views_loaded_before_freeze"] is True
    assert seen["threshold"][0] == YOUNG_GENERATION_THRESHOLD
    assert seen["gc_enabled"] is True
    assert seen["cycle_collected"] is True


def test_the_wsgi_entry_point_tunes_its_collector_the_same_way() -> None:
    seen = _probe("config.wsgi")

    assert seen["frozen"] > 50_000
    assert seen["threshold"][0] == YOUNG_GENERATION_THRESHOLD
    assert seen["cycle_collected"] is True

"""``manage.py faults``: the fault-injection benchmark (issue 18's targets), written to
docs/results/faults_<label>.json.

A whole platform runs in subprocesses (a Redis server of its own, gunicorn, one Celery worker, beat;
jobs.reliability.Platform) on the configured database, which must be one the subprocesses can share
(PostgreSQL, or a SQLite file) and should be a scratch one: the command creates a team ``reliability``
and its jobs there. Two experiments:

1. ``--kills`` kills of the worker (``os._exit`` at the fault points of jobs.faults, in turn) over a
   ``--jobs`` workload (a further round of the same jobs is submitted if one round ends before the
   kills do): stranded jobs, double allocations, quota mismatches, time to all-final after the last
   kill;
2. Redis killed and restarted empty while a backlog waits in it: outcome, reconnect time, time and
   beats until the backlog is placed.

Example: ``DATABASE_URL=postgres://root@127.0.0.1:5432/test_reliability python manage.py migrate &&
DATABASE_URL=... nice -n 10 python manage.py faults --kills 50``.
"""

from __future__ import annotations

import json
import os
import platform as pyplatform
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from jobs import reliability

FAST_ENV = {
    "SCHEDULING_LEASE_SECONDS": "4",
    "RECONCILE_REBIND_AFTER_SECONDS": "4",
    "RECONCILE_LOST_GRACE_SECONDS": "10",
    "CELERY_VISIBILITY_TIMEOUT_SECONDS": "10",
}


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=settings.BASE_DIR,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


class Command(BaseCommand):
    help = "Kill the worker at the fault points over a job workload, restart Redis empty; write JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--jobs", type=int, default=40, help="jobs per round (default 40)")
        parser.add_argument("--kills", type=int, default=50, help="worker kills (default 50)")
        parser.add_argument("--rounds", type=int, default=3, help="most rounds of --jobs jobs (default 3)")
        parser.add_argument(
            "--duration", type=float, default=6000.0, help="simulated seconds per job, about (default 6000)"
        )
        parser.add_argument(
            "--final-timeout", type=float, default=300.0, help="seconds to all-final after the kills"
        )
        parser.add_argument(
            "--no-redis-restart", action="store_true", help="skip the Redis restart experiment"
        )
        parser.add_argument("--label", default="default", help="name of the result: faults_<label>.json")
        parser.add_argument("--out-dir", default=str(Path(settings.BASE_DIR) / "docs" / "results"))

    def handle(self, *args: Any, **options: Any) -> None:
        if connection.vendor == "sqlite" and "memory" in str(connection.settings_dict["NAME"]):
            raise CommandError(
                "faults needs a database its subprocesses can share (PostgreSQL or a SQLite file)"
            )
        if options["kills"] < 0 or options["jobs"] < 1:
            raise CommandError("--kills must be >= 0 and --jobs >= 1")
        out: dict[str, Any] = {
            "benchmark": "faults",
            "commit": git_commit(),
            "machine": {"cpus": os.cpu_count(), "python": pyplatform.python_version()},
            "settings": {"schedule_interval_s": 1.0, "sim_time_scale": 600.0, **FAST_ENV},
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        token = reliability.seed_team()
        with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
            plat = reliability.Platform(Path(tmp) / "kills", extra_env=dict(FAST_ENV))
            try:
                plat.start()
                run = reliability.run_fault_workload(
                    plat,
                    token,
                    jobs=options["jobs"],
                    kills=options["kills"],
                    duration_s=options["duration"],
                    final_timeout_s=options["final_timeout"],
                    max_rounds=options["rounds"],
                    log=lambda line: self.stdout.write(line),
                )
                out["kills"] = run.as_dict()
            except (TimeoutError, RuntimeError) as exc:
                out["kills"] = {"error": str(exc)[:20000]}
                self.stderr.write(plat.logs(chars=4000))
            finally:
                plat.stop()
            if not options["no_redis_restart"]:
                plat = reliability.Platform(Path(tmp) / "redis", extra_env=dict(FAST_ENV))
                try:
                    plat.start()
                    restart = reliability.run_redis_restart(
                        plat,
                        token,
                        running=4,
                        backlog=10,
                        duration_s=6000,
                        final_timeout_s=options["final_timeout"],
                    )
                    out["redis_restart"] = restart.as_dict()
                except (TimeoutError, RuntimeError) as exc:
                    out["redis_restart"] = {"error": str(exc)[:20000]}
                    self.stderr.write(plat.logs(chars=4000))
                finally:
                    plat.stop()
        out["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        path = Path(options["out_dir"]) / f"faults_{options['label']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=2, default=str) + "\n")
        self.stdout.write(
            json.dumps({k: out[k] for k in ("kills", "redis_restart") if k in out}, default=str)[:3000]
        )
        self.stdout.write(f"wrote {path}")

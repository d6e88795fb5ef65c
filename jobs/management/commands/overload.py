"""``manage.py overload``: a burst of submissions (default 10 per second for 3 minutes) against a whole
platform in subprocesses, measuring whether the status sync keeps up; written to
docs/results/overload_<label>.json.

The platform is laid out as ``runplatform`` lays it out (jobs.reliability.Platform): gunicorn, one
worker per queue (cycle, bind with a thread pool, sync, reconcile), beat, a Redis server of its own,
the simulated cluster at its default time scale (60), the production beat interval (3 s). It runs on
the configured database, which should be a scratch one its subprocesses can share (PostgreSQL).

Measured every second:

* **sync age**: seconds since the last completed status sync (the health check's dead-man switch,
  ``/api/v1/health`` -> ``work.age_seconds.sync``), also of the cycle and the reconcile pass;
* **status lag** per job: when the database said SUCCEEDED minus when its last task ended on the
  cluster (the end times are read from the cluster while the burst runs);
* **stale jobs**: jobs whose tasks all ended on the cluster more than 10 s ago but which the database
  still shows as STARTING or RUNNING (the symptom issue 18 found: 214 of them for over 5 minutes);
* queue lengths in Redis per queue (coalescing keeps the cycle queue at one message or none).

The target: sync age and status lag at most 10 s throughout.
"""

from __future__ import annotations

import json
import os
import platform as pyplatform
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from jobs import reliability
from jobs.management.commands.faults import git_commit
from jobs.models import Job


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


class Command(BaseCommand):
    help = "Burst submissions at a whole platform and measure the status sync's lag; write JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--rate", type=float, default=10.0, help="submissions per second (default 10)")
        parser.add_argument("--seconds", type=float, default=180.0, help="length of the burst (default 180)")
        parser.add_argument("--job-seconds", type=float, default=300.0, help="simulated run time per job")
        parser.add_argument("--drain-timeout", type=float, default=300.0)
        parser.add_argument("--label", default="default", help="name of the result: overload_<label>.json")
        parser.add_argument("--out-dir", default=str(Path(settings.BASE_DIR) / "docs" / "results"))

    def handle(self, *args: Any, **options: Any) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("overload needs PostgreSQL (set DATABASE_URL to a scratch database)")
        rate, seconds = float(options["rate"]), float(options["seconds"])
        if rate <= 0 or seconds <= 0:
            raise CommandError("--rate and --seconds must be positive")
        token = reliability.seed_team(username="overload", slug="overload")
        bind_threads = min(8, max(2, 2 * (os.cpu_count() or 1)))
        with tempfile.TemporaryDirectory(prefix="overload-") as tmp:
            plat = reliability.Platform(
                Path(tmp),
                interval_s=3.0,
                time_scale=60.0,
                workers={
                    "worker-cycle": ["cycle"],
                    "worker-bind": ["bind"],
                    "worker-sync": ["sync"],
                    "worker-reconcile": ["reconcile"],
                },
                pools={"worker-bind": ("threads", bind_threads)},
            )
            try:
                plat.start()
                out = self._burst(plat, token, rate, seconds, float(options["job_seconds"]), options)
            finally:
                plat.stop()
        out.update(
            {
                "benchmark": "overload",
                "commit": git_commit(),
                "machine": {"cpus": os.cpu_count(), "python": pyplatform.python_version()},
                "layout": {"bind_threads": bind_threads, "beat_interval_s": 3.0, "sim_time_scale": 60.0},
            }
        )
        path = Path(options["out_dir"]) / f"overload_{options['label']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=2, default=str) + "\n")
        self.stdout.write(json.dumps(out["summary"], default=str))
        self.stdout.write(f"wrote {path}")

    def _burst(
        self, plat: reliability.Platform, token: str, rate: float, seconds: float, job_s: float, options: Any
    ) -> dict[str, Any]:
        import redis

        from scheduler.backends.simulated import SimulatedBackend

        total = int(rate * seconds)
        spec = {"image": "pytorch:2.4", "command": ["python", "train.py"], "gpu_milli": 250}
        submitted: list[int] = []
        failures: list[str] = []
        latencies: list[float] = []
        done_at: list[float] = []
        lock = threading.Lock()
        start = time.monotonic() + 1.0

        def submit(i: int) -> None:
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            t0 = time.monotonic()
            try:
                job_id = plat.submit(token, {**spec, "name": f"burst-{i}", "sim_duration_seconds": job_s})
            except Exception as exc:  # noqa: BLE001  (counted and reported)
                with lock:
                    failures.append(str(exc)[:200])
                return
            with lock:
                submitted.append(job_id)
                latencies.append(time.monotonic() - t0)
                done_at.append(time.monotonic())

        backend = SimulatedBackend(plat.state_path, cluster="demo", time_scale=plat.time_scale)
        client = redis.Redis.from_url(plat.redis_url)
        queues = {kind: f"{plat.queue}.{kind}" for kind in ("cycle", "bind", "sync", "reconcile")}
        ended_at: dict[str, float] = {}
        samples: list[dict[str, Any]] = []
        pool = ThreadPoolExecutor(max_workers=16)
        futures = [pool.submit(submit, i) for i in range(total)]
        end_of_burst = start + seconds
        drain_deadline = end_of_burst + float(options["drain_timeout"])
        drained_at = None
        while time.monotonic() < drain_deadline:
            now_wall = time.time()
            code, health = plat.request("GET", "/api/v1/health")
            ages = (health or {}).get("work", {}).get("age_seconds", {}) if isinstance(health, dict) else {}
            per_job_end: dict[str, float] = {}
            try:
                statuses = backend.task_statuses()
            except Exception:  # noqa: BLE001  (state file mid-write: next second)
                statuses = []
            live_jobs: set[str] = set()
            for st in statuses:
                if st.phase.finished and st.finished_at is not None:
                    ended_at.setdefault(st.task_id, st.finished_at)
                else:
                    live_jobs.add(st.job_id)
            for st in statuses:
                if st.job_id not in live_jobs and st.task_id in ended_at:
                    per_job_end[st.job_id] = max(per_job_end.get(st.job_id, 0.0), ended_at[st.task_id])
            stale_ids = [int(j) for j, t in per_job_end.items() if now_wall - t > 10 and j.isdigit()]
            stale = Job.objects.filter(pk__in=stale_ids, status__in=["STARTING", "RUNNING"]).count()
            samples.append(
                {
                    "t": round(time.monotonic() - start, 1),
                    "health": code,
                    "age_s": ages,
                    "stale_jobs": stale,
                    "queues": {k: int(client.llen(q)) for k, q in queues.items()},
                    "submitted": len(submitted),
                }
            )
            if time.monotonic() > end_of_burst and all(f.done() for f in futures):
                with lock:
                    ids = list(submitted)
                if not Job.objects.filter(pk__in=ids).exclude(status__in=list(reliability.FINAL)).exists():
                    drained_at = time.monotonic()
                    break
            time.sleep(max(0.0, 1.0 - (time.time() - now_wall)))
        pool.shutdown(wait=True)
        with lock:
            ids = list(submitted)
        lags = []
        job_end: dict[int, float] = {}
        for task_id, t in ended_at.items():
            job_id = int(task_id.split("-")[1])
            job_end[job_id] = max(job_end.get(job_id, 0.0), t)
        for job_id, finished in Job.objects.filter(pk__in=ids, status="SUCCEEDED").values_list(
            "pk", "finished_at"
        ):
            if job_id in job_end and finished is not None:
                lags.append(max(0.0, finished.timestamp() - job_end[job_id]))
        during = [s for s in samples if s["t"] <= seconds]
        # The rate the platform took the submissions at: a loaded box answers slower than the
        # schedule, and the 16 submitting threads then fall behind it.
        span = max(done_at) - start if done_at else None
        sync_ages = [float(s["age_s"].get("sync") or 0.0) for s in samples if s["age_s"]]
        cycle_ages = [float(s["age_s"].get("cycle") or 0.0) for s in samples if s["age_s"]]
        outcome: dict[str, int] = {}
        for status in Job.objects.filter(pk__in=ids).values_list("status", flat=True):
            outcome[status] = outcome.get(status, 0) + 1
        summary: dict[str, Any] = {
            "rate_per_s": rate,
            "burst_s": seconds,
            "submitted": len(ids),
            "submission_failures": len(failures),
            "submit_latency_p50_s": pct(latencies, 0.5),
            "submit_latency_p99_s": pct(latencies, 0.99),
            "achieved_rate_per_s": round(len(ids) / max(seconds, span or 0.0), 2),
            "submission_span_s": round(span, 1) if span is not None else None,
            "sync_age_max_s": round(max(sync_ages), 1) if sync_ages else None,
            "sync_age_p99_s": pct(sync_ages, 0.99),
            "cycle_age_max_s": round(max(cycle_ages), 1) if cycle_ages else None,
            "cycle_age_p50_s": pct(cycle_ages, 0.5),
            "status_lag_p50_s": pct(lags, 0.5),
            "status_lag_p99_s": pct(lags, 0.99),
            "status_lag_max_s": round(max(lags), 1) if lags else None,
            "status_lag_mean_s": round(statistics.fmean(lags), 2) if lags else None,
            "jobs_measured_for_lag": len(lags),
            "stale_jobs_max": max((s["stale_jobs"] for s in samples), default=0),
            "health_503_samples": sum(1 for s in samples if s["health"] != 200),
            "queue_max": {
                k: max((s["queues"][k] for s in samples), default=0)
                for k in ("cycle", "bind", "sync", "reconcile")
            },
            "drain_after_burst_s": round(drained_at - end_of_burst, 1) if drained_at else None,
            "outcome": outcome,
            "samples_during_burst": len(during),
        }
        summary["target_met"] = bool(
            summary["sync_age_max_s"] is not None
            and summary["sync_age_max_s"] <= 10
            and (summary["status_lag_max_s"] or 0) <= 10
            and summary["submission_failures"] == 0
        )
        return {"summary": summary, "failures": failures[:20], "samples": samples}

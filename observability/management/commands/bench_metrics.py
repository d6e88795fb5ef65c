"""``manage.py bench_metrics``: what a scrape of /metrics and the history chart cost as the job table
and the history grow. Writes JSON (docs/results/observability_scrape.json by default).

Everything it creates lives in one transaction that is rolled back at the end, so it can run against
a platform's database without leaving rows behind (it still takes locks while it runs: use a scratch
database for big sizes).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform as host
import statistics
import time
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.test import Client
from django.utils import timezone

from accounts.models import Team
from images.models import JobImage
from jobs.models import Job
from observability.collector import PlatformCollector
from observability.history import history_downsample, history_points
from observability.models import ClusterSample
from quotas.models import Quota, RunUsage

TEAMS = 5
STATUS_MIX = (("SUCCEEDED", 7), ("FAILED", 1), ("QUEUED", 1), ("RUNNING", 1))


class _Rollback(Exception):
    pass


def _timed(fn: Any, repeat: int) -> dict[str, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return {"median_s": round(statistics.median(times), 4), "max_s": round(max(times), 4), "runs": repeat}


class Command(BaseCommand):
    help = "Time /metrics and the history chart for growing job tables; writes JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--jobs", default="1000,10000,30000", help="comma-separated job-table sizes")
        parser.add_argument("--repeat", type=int, default=5)
        parser.add_argument("--out", default="docs/results/observability_scrape.json")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            sizes = [int(s) for s in str(options["jobs"]).split(",") if s.strip()]
        except ValueError:
            raise CommandError(
                f"--jobs must be comma-separated whole numbers, got {options['jobs']!r}"
            ) from None
        if not sizes or any(s <= 0 for s in sizes) or options["repeat"] <= 0:
            raise CommandError("--jobs and --repeat must be positive")
        result: dict[str, Any] = {}
        try:
            with transaction.atomic():
                result = self._run(sorted(sizes), options["repeat"])
                raise _Rollback
        except _Rollback:
            pass
        result["machine"] = {
            "cpus": os.cpu_count(),
            "python": host.python_version(),
            "load_1m": os.getloadavg()[0],
        }
        out = Path(options["out"])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        self.stdout.write(f"wrote {out}")

    def _run(self, sizes: list[int], repeat: int) -> dict[str, Any]:
        user = get_user_model().objects.create_user("bench-metrics", password="unused-password-1")
        image = JobImage.objects.create(name="bench-metrics", tag="1")
        teams = [Team.objects.create(name=f"Bench {i}", slug=f"bench-{i}") for i in range(TEAMS)]
        for team in teams:
            Quota.objects.create(team=team)
        client = Client(HTTP_HOST="localhost")
        rows: list[dict[str, Any]] = []
        made = 0
        for size in sizes:
            self._jobs(size - made, made, user, image, teams)
            made = size
            scrape = _timed(lambda: client.get("/metrics"), repeat)
            collector = PlatformCollector()
            parts = {
                name: _timed(lambda name=name, c=collector: list(getattr(c, name)()), repeat)["median_s"]
                for name in ("_queue", "_jobs", "_start_wait", "_cluster", "_teams", "_heartbeats")
            }
            rows.append({"jobs": size, "metrics_scrape": scrape, "collector_parts_median_s": parts})
            self.stdout.write(f"{size} jobs: /metrics {scrape['median_s']} s (median of {repeat})")
        now = timezone.now()
        self._history(now)
        samples = ClusterSample.objects.count()
        chart = _timed(lambda: history_points(range_name="30d", now=now), repeat)
        week = _timed(lambda: history_points(range_name="7d", now=now), repeat)
        downsample = _timed(lambda: history_downsample(now=now), 1)
        return {
            "method": "one transaction, rolled back; Django test client in-process; the configured backend",
            "scrapes": rows,
            "history": {
                "samples": samples,
                "points_30d": chart,
                "points_7d": week,
                "downsample_pass": downsample,
            },
        }

    def _jobs(self, count: int, offset: int, user: Any, image: JobImage, teams: list[Team]) -> None:
        now = timezone.now()
        cycle = [status for status, weight in STATUS_MIX for _ in range(weight)]
        jobs = []
        for i in range(offset, offset + count):
            status = cycle[i % len(cycle)]
            submitted = now - dt.timedelta(minutes=i % 5000)
            started = submitted + dt.timedelta(seconds=(i * 7) % 3600) if status != "QUEUED" else None
            jobs.append(
                Job(
                    name=f"bench-{i}", team=teams[i % TEAMS], user=user, image=image, command=["true"],
                    gpus=(i % 3), gpu_milli=0 if i % 3 else 250, status=status,
                    failure_category="OOM" if status == "FAILED" else "", submitted_at=submitted,
                    started_at=started, finished_at=started + dt.timedelta(minutes=30) if started and status in ("SUCCEEDED", "FAILED") else None,
                    run_started_at=started if status == "RUNNING" else None,
                )
            )  # fmt: skip
        created = Job.objects.bulk_create(jobs, batch_size=2000)
        RunUsage.objects.bulk_create(
            [
                RunUsage(
                    team=j.team, job=j, started_at=j.started_at, ended_at=j.finished_at, gpus=max(1, j.gpus),
                    gpu_milli=j.gpus * 1000 or j.gpu_milli, gpu_seconds=1800.0 * max(1, j.gpus), ended_as=j.status,
                )
                for j in created
                if j.started_at and j.finished_at
            ],
            batch_size=2000,
        )  # fmt: skip

    def _history(self, now: dt.datetime) -> None:
        """30 days of history as the downsampler leaves it: minutes for a day, 10 minutes before."""

        def row(at: dt.datetime, step: int) -> ClusterSample:
            return ClusterSample(
                at=at, resolution_s=step, covered_s=float(step), capacity_milli=40000.0, allocated_milli=20000.0,
                fragmentation=0.1, running=20.0, waiting=5.0,
                by_team={f"bench-{i}": {"allocated_milli": 4000.0, "running": 4.0, "waiting": 1.0} for i in range(TEAMS)},
            )  # fmt: skip

        start = now - dt.timedelta(days=30)
        rows = [row(start + dt.timedelta(minutes=10 * i), 600) for i in range(29 * 144)]
        rows += [row(now - dt.timedelta(days=1) + dt.timedelta(minutes=i), 60) for i in range(1440)]
        ClusterSample.objects.bulk_create(rows, batch_size=2000)

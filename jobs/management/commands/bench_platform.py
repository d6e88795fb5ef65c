"""Benchmark of the platform around the scheduler: the real cycle, services, database and simulated backend.

``python manage.py bench-platform --cluster alibaba-openb --jobs 100,1000,5000 --json OUT``

On the configured database (PostgreSQL from ``DATABASE_URL``, or the embedded SQLite) and a simulated
cluster built from a cluster spec (``scheduler/sim/clusters/``) in a temporary state file:

1. **Submit -> ADMITTED**: ``--admit-samples`` one-GPU jobs, one at a time, on the empty cluster. Each
   is submitted through ``jobs.services.job_submit`` (whose commit fires the cycle trigger) and the
   cycle that trigger asks for is run here at once, as an idle worker would; the latency is from the
   submit call to the job being ADMITTED (no broker hop, no worker start-up).
2. **Fill**: one non-preemptible job per node, asking for all of that node's GPUs of its model,
   submitted largest first and admitted and bound by real cycles, so every GPU is taken.
3. **Waiting jobs grow** to each count of ``--jobs``: GPU jobs of four shapes (one GPU, half a GPU,
   two GPUs, eight GPUs) that must wait. The first ``--submit-samples`` of each count (and one of each
   shape) are submitted through ``job_submit``, each timed; the rest are bulk copies of those rows
   (the same columns, no events), so the set-up does not take the benchmark's whole run. After one cycle that writes every
   waiting reason, ``--cycles`` cycles are timed through ``run_scheduling_cycle`` (lease, metrics and
   all), wall and CPU, split into snapshot (the backend's), view (the rest of ``build_view``),
   ``plan_cycle``, persist (placements and waiting reasons written) and other.

The database must hold no active jobs (the benchmark's own would mix with them): use a fresh one.
Numbers go to ``--json`` (docs/results/platform_*.json; docs/benchmarks.md has the table).
"""

from __future__ import annotations

import contextlib
import copy
import cProfile
import json
import os
import platform as host_platform
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.db.models.base import ModelState
from django.test import override_settings

from accounts.models import Membership, Role, Team
from images.models import JobImage
from jobs import binding, scheduling
from jobs.management.commands._measure import commit, median, percentile, unlimited_quota
from jobs.models import Job
from jobs.services import job_cancel, job_submit
from jobs.specs import JobSpec
from jobs.states import JobStatus
from scheduler.backends.simulated import SimulatedBackend

ACTIVE = [
    JobStatus.SUBMITTED,
    JobStatus.QUEUED,
    JobStatus.ADMITTED,
    JobStatus.STARTING,
    JobStatus.RUNNING,
    JobStatus.PREEMPTING,
]
# Waiting jobs' shapes, in turn: (whole GPUs, GPU milli of one shared GPU).
SHAPES = [(1, None), (0, 500), (2, None), (8, None)]
LONG_S = 10.0**7  # simulated seconds: nothing finishes during the benchmark
SPLIT = ("snapshot", "view", "plan_cycle", "persist", "other")


def _copy(job: Job, name: str) -> Job:
    """Another QUEUED row like ``job`` (a submitted one): what job_submit would store for the same spec,
    written in bulk so 5,000 waiting jobs take seconds to set up, not the benchmark's whole run."""
    clone = copy.copy(job)
    clone._state = ModelState()  # a new row, not the template's
    clone.pk = None
    clone.name = name
    return clone


class _Split:
    """Wall seconds spent in the cycle's parts, by wrapping the functions the cycle calls (restored after)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def _timed(self, key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[key] += time.perf_counter() - started

        return timed

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        patched = [
            (SimulatedBackend, "snapshot", "snapshot"),
            (scheduling, "build_view", "view"),
            (scheduling, "plan_cycle", "plan_cycle"),
            (scheduling, "_persist_placement", "persist"),
            (scheduling, "_record_waiting", "persist"),
        ]
        originals = [(owner, name, getattr(owner, name)) for owner, name, _ in patched]
        try:
            for owner, name, key in patched:
                setattr(owner, name, self._timed(key, getattr(owner, name)))
            yield
        finally:
            for owner, name, original in originals:
                setattr(owner, name, original)

    def parts(self, total: float) -> dict[str, float]:
        snapshot = self.seconds["snapshot"]
        view = self.seconds["view"] - snapshot  # build_view includes the snapshot
        parts = {
            "snapshot": snapshot,
            "view": view,
            "plan_cycle": self.seconds["plan_cycle"],
            "persist": self.seconds["persist"],
        }
        parts["other"] = max(0.0, total - sum(parts.values()))
        return parts


class Command(BaseCommand):
    help = "Time the scheduling cycle, submits and submit -> ADMITTED on a simulated cluster; write JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--cluster", default="alibaba-openb", help="cluster spec name (scheduler/sim/clusters)"
        )
        parser.add_argument(
            "--jobs", default="100,1000,5000", help="waiting-job counts, comma-separated, rising"
        )
        parser.add_argument("--cycles", type=int, default=5, help="timed cycles per count")
        parser.add_argument("--admit-samples", type=int, default=10, help="submit -> ADMITTED samples")
        parser.add_argument(
            "--submit-samples",
            type=int,
            default=200,
            help="waiting jobs per count submitted (and timed) through job_submit; the rest are copies",
        )
        parser.add_argument("--json", default="", help="write the results here")
        parser.add_argument("--profile", default="", help="write cProfile stats of the last timed cycle here")

    def handle(self, *args: Any, **options: Any) -> None:
        counts = self._counts(options["jobs"])
        if options["cycles"] < 1 or options["admit_samples"] < 0 or options["submit_samples"] < 1:
            raise CommandError("--cycles and --submit-samples must be >= 1 and --admit-samples >= 0")
        active = Job.objects.filter(status__in=[s.value for s in ACTIVE]).count()
        if active:
            raise CommandError(
                f"bench-platform needs a database with no active jobs (found {active}); use a fresh one"
            )
        with tempfile.TemporaryDirectory(prefix="bench-platform-") as tmp:
            state = Path(tmp) / "cluster.json"
            with override_settings(
                CLUSTER_BACKEND="simulated",
                SIM_CLUSTER=options["cluster"],
                SIM_STATE_PATH=str(state),
                CELERY_TASK_ALWAYS_EAGER=False,
                QUEUE_ETA=False,
            ):
                try:
                    backend = SimulatedBackend(state, cluster=options["cluster"])
                except ValueError as exc:
                    raise CommandError(str(exc)) from None
                result = self._run(backend, counts, options)
        out = options["json"]
        if out:
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            Path(out).write_text(json.dumps(result, indent=2) + "\n")
        for run in result["runs"]:
            self.stdout.write(
                f"{run['jobs']:>6} waiting: cycle median {run['cycle_s_median']:.3f} s "
                f"(p99 {run['cycle_s_p99']:.3f} s, CPU {run['cycle_cpu_s_median']:.3f} s), "
                f"submit median {run['submit_s_median'] * 1000:.1f} ms"
            )
        if result["submit_to_admitted_s_median"] is not None:
            self.stdout.write(
                f"submit -> ADMITTED median {result['submit_to_admitted_s_median'] * 1000:.1f} ms"
            )
        if out:
            self.stdout.write(f"wrote {out}")

    @staticmethod
    def _counts(raw: str) -> list[int]:
        try:
            counts = [int(part) for part in raw.split(",") if part.strip()]
        except ValueError:
            raise CommandError(f"--jobs must be comma-separated whole numbers, got {raw!r}") from None
        if not counts or any(c < 1 for c in counts) or counts != sorted(set(counts)):
            raise CommandError(f"--jobs must be rising positive counts, got {raw!r}")
        return counts

    # ------------------------------------------------------------------ set-up

    def _tenant(self) -> tuple[Any, Team, JobImage]:
        slug = f"bench-{int(time.time())}"
        team = Team.objects.create(slug=slug, name="Platform benchmark")
        # All guaranteed as well: the cycle's cohort gate must not hold anything back.
        unlimited_quota(team, guaranteed_gpu_milli=10**9)
        user = get_user_model().objects.create(username=slug)
        Membership.objects.create(user=user, team=team, role=Role.MEMBER)
        image, _ = JobImage.objects.get_or_create(
            name="bench-platform", tag="cpu", defaults={"is_active": True}
        )
        return user, team, image

    def _submit(self, user: Any, team: Team, image: JobImage, spec: JobSpec) -> tuple[Job, float]:
        started = time.perf_counter()
        job = job_submit(user=user, spec=spec, image=image, team=team)
        return job, time.perf_counter() - started

    def _cycle(self, backend: SimulatedBackend) -> scheduling.CycleResult:
        result = scheduling.run_scheduling_cycle(backend=backend)
        if result is None:
            raise CommandError("another scheduling cycle holds the lease on this database; stop it first")
        return result

    def _bind(self, backend: SimulatedBackend, job_ids: list[int]) -> None:
        for pk in job_ids:
            binding.job_bind(job_id=pk, backend=backend)

    def _admit_latency(
        self, backend: SimulatedBackend, user: Any, team: Team, image: JobImage, n: int
    ) -> list[float]:
        samples: list[float] = []
        for i in range(n):
            spec = JobSpec(name=f"admit-{i}", command=["true"], gpus=1, sim_duration_seconds=LONG_S)
            started = time.perf_counter()
            job = job_submit(user=user, spec=spec, image=image, team=team)
            admitted = self._cycle(backend).admitted
            if job.pk not in admitted:
                raise CommandError(f"job {job.pk} was not admitted by the cycle its submit triggered")
            samples.append(time.perf_counter() - started)
            self._bind(backend, [job.pk])
        return samples

    def _fill(self, backend: SimulatedBackend, user: Any, team: Team, image: JobImage) -> list[float]:
        """Take every free GPU with one whole-node job per node (largest first, pinned to the model)."""
        nodes = backend.snapshot().nodes
        free = [(n, sum(1 for g in n.gpus if g.free_milli >= 1000)) for n in nodes]
        wanted = sorted(((count, n.gpu_model) for n, count in free if count), reverse=True)
        timings: list[float] = []
        for i, (count, model) in enumerate(wanted):
            spec = JobSpec(
                name=f"fill-{i}",
                command=["true"],
                gpus=count,
                gpu_models=[model],
                cpu_milli=500,
                memory_mib=1024,
                preemptible=False,
                sim_duration_seconds=LONG_S,
            )
            timings.append(self._submit(user, team, image, spec)[1])
        for _ in range(10):
            admitted = self._cycle(backend).admitted
            self._bind(backend, admitted)
            if not admitted:
                break
        left = backend.snapshot()
        free_gpus = sum(1 for n in left.nodes for g in n.gpus if g.free_milli >= 1000)
        if free_gpus:
            raise CommandError(
                f"the fill left {free_gpus} GPU(s) free; the cluster must be full for the benchmark"
            )
        for job in Job.objects.filter(team=team, status=JobStatus.QUEUED.value, name__startswith="fill-"):
            job_cancel(job=job, user=user, reason="bench-platform: the cluster is full without it")
        return timings

    # ------------------------------------------------------------------ the runs

    def _run(self, backend: SimulatedBackend, counts: list[int], options: dict[str, Any]) -> dict[str, Any]:
        user, team, image = self._tenant()
        admit = self._admit_latency(backend, user, team, image, options["admit_samples"])
        fill_submits = self._fill(backend, user, team, image)
        runs: list[dict[str, Any]] = []
        waiting = 0
        # A shape no node could hold is refused at submit: small clusters get their largest node's size.
        widest = max(len(n.gpus) for n in backend.snapshot().nodes)
        templates: dict[int, Job] = {}  # a submitted job of each shape, copied past --submit-samples
        for count in counts:
            submits: list[float] = []
            sampled = 0
            copies: list[Job] = []
            while waiting < count:
                gpus, milli = SHAPES[waiting % len(SHAPES)]
                gpus = min(gpus, widest)
                spec = JobSpec(
                    name=f"wait-{waiting}",
                    command=["true"],
                    gpus=gpus,
                    gpu_milli=milli,
                    cpu_milli=500,
                    memory_mib=1024,
                    sim_duration_seconds=600.0,
                )
                if sampled < options["submit_samples"] or waiting < len(SHAPES):
                    job, seconds = self._submit(user, team, image, spec)
                    submits.append(seconds)
                    templates[waiting % len(SHAPES)] = job
                    sampled += 1
                else:
                    copies.append(_copy(templates[waiting % len(SHAPES)], spec.name))
                waiting += 1
            Job.objects.bulk_create(copies, batch_size=1000)
            self._cycle(backend)  # writes every new waiting reason: a one-off, not what a steady cycle does
            profile = options["profile"] if count == counts[-1] else ""
            runs.append(self._timed_cycles(backend, count, submits, options["cycles"], profile))
            queued = Job.objects.filter(team=team, status=JobStatus.QUEUED.value).count()
            if queued != count:
                raise CommandError(f"{queued} jobs wait, not {count}: the cluster was not full")
        snapshot = backend.snapshot()
        return {
            "benchmark": "platform",
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commit": commit(),
            "machine": {
                "cpus": os.cpu_count(),
                "python": host_platform.python_version(),
                "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
            },
            "config": {
                "cluster": options["cluster"],
                "nodes": len(snapshot.nodes),
                "gpus": sum(len(n.gpus) for n in snapshot.nodes),
                "database": connection.vendor,
                "cycles_per_count": options["cycles"],
                "waiting_shapes": [{"gpus": g, "gpu_milli": m} for g, m in SHAPES],
                "queue_eta": False,
            },
            "submit_to_admitted_s_median": round(median(admit), 4) if admit else None,
            "submit_to_admitted_s_p99": round(percentile(admit, 99), 4) if admit else None,
            "fill_submit_s_median": round(median(fill_submits), 4),
            "runs": runs,
        }

    def _timed_cycles(
        self, backend: SimulatedBackend, count: int, submits: list[float], cycles: int, profile: str = ""
    ) -> dict[str, Any]:
        walls: list[float] = []
        cpus: list[float] = []
        parts: dict[str, list[float]] = {key: [] for key in SPLIT}
        for _ in range(cycles):
            split = _Split()
            profiler = cProfile.Profile() if profile else None
            with split.installed():
                wall0, cpu0 = time.perf_counter(), time.process_time()
                if profiler is not None:
                    profiler.enable()
                self._cycle(backend)
                if profiler is not None:
                    profiler.disable()
                    profiler.dump_stats(profile)
                wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            walls.append(wall)
            cpus.append(cpu)
            for key, value in split.parts(wall).items():
                parts[key].append(value)
        return {
            "jobs": count,
            "cycle_s_median": round(median(walls), 4),
            "cycle_s_p99": round(percentile(walls, 99), 4),
            "cycle_cpu_s_median": round(median(cpus), 4),
            "submit_s_median": round(median(submits), 4),
            "submit_s_p99": round(percentile(submits, 99), 4),
            "split_s_median": {key: round(median(values), 4) for key, values in parts.items()},
        }

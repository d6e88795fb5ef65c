"""Per-request latency of the job API, in one process: wall and CPU of each answer, no network, no load.

``python manage.py bench-api --database-url postgres://... --redis-url redis://... --cluster philly-512
--jobs 200 --requests 100 --json docs/results/api_answers_NAME.json``

With ``--database-url`` the command migrates that database (it must hold no jobs: use a fresh one) and
runs itself again in a child on it, with a fresh temporary ``var/``, ``REDIS_URL`` as cache and broker
when given, and DEBUG off (DEBUG keeps every query's text, which a server does not). Without it, it runs
here on the configured database (the tests' one, or ``DATABASE_URL``).

Set-up: a team with room for everything, a member with an API token per block of requests (the write
limit counts per user), and ``--jobs`` jobs submitted through ``job_submit`` on the simulated
``--cluster``, then moved through ``job_transition`` into a mix of states, as a busy team's list shows
them: queued, running with one task per replica on the cluster's nodes, succeeded, failed, and
preempted (preempted by another job, requeued, waiting again).

Then DRF's ``APIClient`` drives the API in rounds: each round sends a block of ``--block`` requests of
each kind in turn (``list50``: ``GET /api/v1/jobs/``, a page of 50; ``list20``: ``?page_size=20``, the
load test's; ``detail``: ``GET /api/v1/jobs/<id>/`` over the jobs in turn; ``submit``: ``POST
/api/v1/jobs/``, a one-GPU job, 201), until each kind has ``--requests``, after ``--warmup`` unmeasured
ones each. Per request: wall (``perf_counter``) and CPU of this process (``process_time``: what the web
tier spends on it; the database server's CPU is not in it). The JSON has per kind the two latency
summaries and the status codes, and the run's provenance (commit, dirty flag, load average).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from accounts.models import Membership, Role, Team
from accounts.services import token_create
from images.models import JobImage
from jobs.management.commands._measure import (
    latency_summary_ms,
    manage,
    platform_env,
    provenance,
    unlimited_quota,
)
from jobs.models import Job, Task
from jobs.services import job_submit, job_transition
from jobs.specs import JobSpec
from jobs.states import JobStatus
from scheduler.backends.simulated import SimulatedBackend

KINDS = ("list50", "list20", "detail", "submit")
EXPECTED = {"list50": "200", "list20": "200", "detail": "200", "submit": "201"}
# The jobs' states, in turn, per 20 jobs: what a busy team's list holds.
STATE_MIX = (
    ["queued"] * 8 + ["running"] * 6 + ["succeeded"] * 3 + ["failed"] * 2 + ["preempted"] * 1
)  # fmt: skip
SUBMIT_SPEC = {"command": ["python", "train.py"], "gpus": 1, "cpu_milli": 1000, "memory_mib": 4096,
               "sim_duration_seconds": 600}  # fmt: skip


def _allowed_host() -> str:
    named = [host for host in settings.ALLOWED_HOSTS if host != "*" and not host.startswith(".")]
    return named[0] if named else "127.0.0.1"


class Command(BaseCommand):
    help = (
        "Time job lists, details and submits through DRF's APIClient (wall and CPU per request); write JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--cluster", default="philly-512", help="cluster spec name (scheduler/sim/clusters)"
        )
        parser.add_argument("--jobs", type=int, default=200, help="jobs of mixed states before the requests")
        parser.add_argument("--requests", type=int, default=100, help="measured requests per kind")
        parser.add_argument("--warmup", type=int, default=5, help="unmeasured requests per kind first")
        parser.add_argument("--block", type=int, default=10, help="requests of one kind in a row")
        parser.add_argument("--json", default="", help="write the results here")
        parser.add_argument(
            "--database-url", default="", help="run on this (fresh) database in a child, migrated first"
        )
        parser.add_argument("--redis-url", default="", help="with --database-url: Redis as cache and broker")

    def handle(self, *args: Any, **options: Any) -> None:
        self._check(options)
        if options["database_url"]:
            self._in_child(options)
            return
        if Job.objects.exists():
            raise CommandError(
                f"bench-api needs a database with no jobs (found {Job.objects.count()}); use a fresh one"
            )
        loadavg_at_start = os.getloadavg()[0]
        with (
            tempfile.TemporaryDirectory(prefix="bench-api-") as tmp,
            override_settings(
                CLUSTER_BACKEND="simulated",
                SIM_CLUSTER=options["cluster"],
                SIM_STATE_PATH=str(Path(tmp) / "cluster.json"),
                CELERY_TASK_ALWAYS_EAGER=False,  # a submit's cycle trigger goes to the broker, as a server's does
            ),
        ):
            backend = SimulatedBackend(Path(tmp) / "cluster.json", cluster=options["cluster"])
            result = self._run(backend, options)
        result["provenance"] = provenance(loadavg_at_start)
        wrong = {
            kind: counts
            for kind, counts in ((k, result["requests"][k]["status_counts"]) for k in KINDS)
            if set(counts) != {EXPECTED[kind]}
        }
        if wrong:
            raise CommandError(
                f"requests were not answered as a client expects, so no latency is written: {wrong}"
            )
        if options["json"]:
            out = Path(options["json"])
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(result, indent=2) + "\n")
        for kind in KINDS:
            wall, cpu = result["requests"][kind]["wall"], result["requests"][kind]["cpu"]
            self.stdout.write(
                f"{kind:>7}: wall p50 {wall['p50_ms']:.1f} ms p99 {wall['p99_ms']:.1f} ms, "
                f"CPU p50 {cpu['p50_ms']:.1f} ms ({wall['count']} requests)"
            )
        if options["json"]:
            self.stdout.write(f"wrote {options['json']}")

    def _check(self, options: dict[str, Any]) -> None:
        if options["jobs"] < 0 or options["warmup"] < 0:
            raise CommandError("--jobs and --warmup must be >= 0")
        if options["requests"] < 1 or options["block"] < 1:
            raise CommandError("--requests and --block must be >= 1")
        if options["redis_url"] and not options["database_url"]:
            raise CommandError("--redis-url needs --database-url (the configured cache is used otherwise)")
        try:
            with tempfile.TemporaryDirectory(prefix="bench-api-check-") as tmp:
                SimulatedBackend(Path(tmp) / "cluster.json", cluster=options["cluster"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None

    def _in_child(self, options: dict[str, Any]) -> None:
        with tempfile.TemporaryDirectory(prefix="bench-api-") as tmp:
            var = Path(tmp) / "var"
            var.mkdir()
            env = platform_env(var, options["database_url"], options["redis_url"]) | {"DJANGO_DEBUG": "false"}
            manage(env, "migrate", "--noinput", "-v", "0")
            forwarded = ["--cluster", options["cluster"], "--jobs", str(options["jobs"])]
            forwarded += ["--requests", str(options["requests"]), "--warmup", str(options["warmup"])]
            forwarded += ["--block", str(options["block"])]
            if options["json"]:
                forwarded += ["--json", str(Path(options["json"]).resolve())]
            self.stdout.write(manage(env, "bench-api", *forwarded, timeout=3600).rstrip())
        sys.stdout.flush()

    # ------------------------------------------------------------------ set-up

    def _tenant(self, clients: int) -> tuple[Team, JobImage, list[tuple[Any, APIClient]]]:
        team = Team.objects.create(slug=f"bench-api-{int(time.time())}", name="API benchmark")
        unlimited_quota(team, guaranteed_gpu_milli=0)
        image, _ = JobImage.objects.get_or_create(name="bench-api", tag="cuda", defaults={"is_active": True})
        users: list[tuple[Any, APIClient]] = []
        for i in range(clients):
            user = get_user_model().objects.create(username=f"{team.slug}-{i:03d}")
            Membership.objects.create(user=user, team=team, role=Role.MEMBER)
            # An allowed host: with DEBUG off, Django answers the test client's "testserver" with 400.
            client = APIClient(HTTP_HOST=_allowed_host())
            client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user, name='bench-api')[1]}")
            users.append((user, client))
        return team, image, users

    def _jobs(
        self, backend: SimulatedBackend, user: Any, team: Team, image: JobImage, count: int
    ) -> Counter[str]:
        nodes = [node.name for node in backend.snapshot().nodes]
        states: Counter[str] = Counter()
        for i in range(count):
            state = STATE_MIX[i % len(STATE_MIX)]
            spec = JobSpec(
                name=f"{state}-{i}",
                command=["python", "train.py", f"--seed={i}"],
                gpus=1 + i % 2,
                replicas=2 if state == "running" and i % 3 == 0 else 1,
                cpu_milli=1000,
                memory_mib=4096,
                env={"SEED": str(i)},
                sim_duration_seconds=600.0,
            )
            job = job_submit(user=user, spec=spec, image=image, team=team)
            if state != "queued":
                self._place(job, nodes[i % len(nodes)])
            if state in {"succeeded", "failed"}:
                job_transition(
                    job=job,
                    to=JobStatus.SUCCEEDED if state == "succeeded" else JobStatus.FAILED,
                    actor="system",
                    reason="" if state == "succeeded" else "exit 1",
                    failure_category="" if state == "succeeded" else "USER",
                )
            if state == "preempted":
                job_transition(
                    job=job, to=JobStatus.PREEMPTING, actor="scheduler", reason="preempted by rule las-level"
                )
                job_transition(job=job, to=JobStatus.REQUEUED, actor="system")
                job_transition(job=job, to=JobStatus.QUEUED, actor="system", reason="requeued")
            states[state] += 1
        return states

    def _place(self, job: Job, node: str) -> None:
        for status in (JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING):
            job_transition(job=job, to=status, actor="scheduler", reason="placed")
        Task.objects.bulk_create(
            Task(job=job, index=index, name=f"job-{job.pk}-{index}", node=node, gpu_indices=list(range(job.gpus)),
                 gpu_milli=job.gpu_milli_per_replica, phase="RUNNING", placement_reason="least fragmentation")
            for index in range(job.replicas)
        )  # fmt: skip

    # ------------------------------------------------------------------ the requests

    def _run(self, backend: SimulatedBackend, options: dict[str, Any]) -> dict[str, Any]:
        block, warmup, measured = options["block"], options["warmup"], options["requests"]
        rounds = -(-(warmup + measured) // block)
        team, image, users = self._tenant(rounds)
        states = self._jobs(backend, users[0][0], team, image, options["jobs"])
        job_ids = list(Job.objects.filter(team=team).order_by("pk").values_list("pk", flat=True))
        payload = {**SUBMIT_SPEC, "image": image.pk, "team": team.pk}
        sent: Counter[str] = Counter()

        def request(kind: str, client: APIClient) -> Callable[[], Any]:
            if kind == "list50":
                return lambda: client.get("/api/v1/jobs/")
            if kind == "list20":
                return lambda: client.get("/api/v1/jobs/?page_size=20")
            if kind == "detail":
                return lambda: client.get(f"/api/v1/jobs/{job_ids[sent['detail'] % len(job_ids)]}/")
            return lambda: client.post(
                "/api/v1/jobs/", {**payload, "name": f"bench-{sent['submit']}"}, format="json"
            )

        walls: dict[str, list[float]] = {kind: [] for kind in KINDS}
        cpus: dict[str, list[float]] = {kind: [] for kind in KINDS}
        statuses: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
        for round_index in range(rounds):
            client = users[round_index][1]
            for kind in KINDS:
                for _ in range(block):
                    if sent[kind] >= warmup + measured:
                        break
                    if kind == "detail" and not job_ids:
                        job_ids.extend(Job.objects.filter(team=team).values_list("pk", flat=True))
                    send = request(kind, client)
                    wall0, cpu0 = time.perf_counter(), time.process_time()
                    response = send()
                    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
                    if sent[kind] >= warmup:
                        walls[kind].append(wall)
                        cpus[kind].append(cpu)
                        statuses[kind][str(response.status_code)] += 1
                    sent[kind] += 1
        return {
            "benchmark": "api_answers",
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "config": {
                "cluster": options["cluster"],
                "nodes": len(backend.snapshot().nodes),
                "jobs": options["jobs"],
                "job_states": dict(sorted(states.items())),
                "requests_per_kind": measured,
                "warmup_per_kind": warmup,
                "block": block,
                "database": connection.vendor,
                "cache": settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[-1],
                "debug": settings.DEBUG,
                "client": "rest_framework.test.APIClient, in-process",
                "paths": {
                    "list50": "GET /api/v1/jobs/",
                    "list20": "GET /api/v1/jobs/?page_size=20",
                    "detail": "GET /api/v1/jobs/<id>/",
                    "submit": "POST /api/v1/jobs/",
                },
            },
            "requests": {
                kind: {
                    "wall": latency_summary_ms(walls[kind]),
                    "cpu": latency_summary_ms(cpus[kind]),
                    "status_counts": dict(sorted(statuses[kind].items())),
                }
                for kind in KINDS
            },
        }

"""Load benchmark of the web tier: N clients for D seconds, mixing reads and submissions.

``python manage.py loadtest`` starts the embedded default itself, as ``make run`` would start it
(``runplatform``: gunicorn, a Celery worker and beat, SQLite in WAL mode, the file broker) with the
simulated cluster, in a fresh temporary ``var/``; ``--url`` (with ``--token``) aims at a platform that
is already running instead. Each client is a thread in a closed loop (the next request when the last
answer arrived), one new connection per request, signed in as a user of its own, so
the per-user write limit sees what one busy person would send. By default there is no think time, so
the clients saturate the server and latency is mostly queueing (about clients / throughput);
``--think-time T`` makes each client wait a uniform 0.5T-1.5T seconds after each answer, as locust's
``between`` does, so the server sees a bounded offered rate (about clients / (T + latency)) and the
latencies measure service under that load. The mix per client:

  40 % GET /api/v1/jobs/?page_size=20       20 % GET /api/v1/jobs/<a job it submitted>/
  10 % GET /api/v1/images/                  10 % GET /api/v1/health
  10 % GET /api/v1/cluster/                 10 % POST /api/v1/jobs/ (a short CPU-only job)

An error is a request with no HTTP answer (a reset, a refused connection, a timeout) or a 5xx; the
platform's logs are searched for "database is locked" afterwards. 4xx answers are counted apart (the
submissions are valid, so none are expected). Results go to ``--out`` as JSON (docs/benchmarks.md).
"""

from __future__ import annotations

import http.client
import json
import os
import platform as host_platform
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobs.management.commands._measure import (
    commit,
    cpu_split,
    latency_summary_ms,
    manage,
    platform_env,
    role_usage,
)

MIX = [
    ("list", 40),
    ("detail", 20),
    ("images", 10),
    ("health", 10),
    ("cluster", 10),
    ("submit", 10),
]

SEED = """
import json
from django.contrib.auth import get_user_model
from accounts.models import Membership, Role, Team
from accounts.services import token_create
from images.models import JobImage
from quotas.models import Quota

clients = {clients}
team, _ = Team.objects.get_or_create(slug="load", defaults={{"name": "Load test"}})
# Room for every submission: the benchmark measures the web tier, not quota refusals.
Quota.objects.update_or_create(team=team, defaults=dict(
    max_gpu_milli=10**9, per_user_gpu_milli=10**9, max_concurrent_jobs=10**6,
    gpu_hours_per_month=10.0**9, guaranteed_gpu_milli=0))
image = JobImage.objects.filter(is_active=True).order_by("pk").first()
tokens = []
for i in range(clients):
    user, _ = get_user_model().objects.get_or_create(username=f"load-{{i:03d}}")
    Membership.objects.get_or_create(user=user, team=team, defaults={{"role": Role.MEMBER}})
    tokens.append(token_create(user=user, name="loadtest")[1])
print("SEED " + json.dumps({{"tokens": tokens, "image": image.pk, "team": team.pk}}))
"""


class _Client(threading.Thread):
    def __init__(self, *, host: str, port: int, token: str, image: int, team: int | None, stop_at: float,
                 seed: int, timeout: float, think_s: float = 0.0) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.host, self.port, self.token, self.image, self.team = host, port, token, image, team
        self.stop_at, self.timeout, self.think_s = stop_at, timeout, think_s
        self.random = random.Random(seed)
        self.jobs: list[int] = []
        # (kind, start on the monotonic clock, seconds to the whole answer, status or exception name)
        self.samples: list[tuple[str, float, float, int | str]] = []

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            headers = {"Authorization": f"Token {self.token}", "Connection": "close"}
            payload = None
            if body is not None:
                payload = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def _one(self, kind: str) -> tuple[int, bytes]:
        if kind == "detail" and self.jobs:
            return self._request("GET", f"/api/v1/jobs/{self.random.choice(self.jobs[-20:])}/")
        if kind == "submit":
            spec: dict[str, Any] = {
                "image": self.image,
                "command": ["true"],
                "cpu_milli": 100,
                "memory_mib": 64,
                "sim_duration_seconds": 30,
            }
            if self.team is not None:
                spec["team"] = self.team
            return self._request("POST", "/api/v1/jobs/", spec)
        path = {
            "list": "/api/v1/jobs/?page_size=20",
            "images": "/api/v1/images/",
            "health": "/api/v1/health",
            "cluster": "/api/v1/cluster/",
        }[kind]
        return self._request("GET", path)

    def run(self) -> None:
        kinds = [kind for kind, _ in MIX]
        weights = [weight for _, weight in MIX]
        while time.monotonic() < self.stop_at:
            kind = self.random.choices(kinds, weights)[0]
            if kind == "detail" and not self.jobs:
                kind = "submit"
            started = time.monotonic()
            try:
                status, body = self._one(kind)
                outcome: int | str = status
                if kind == "submit" and status == 201:
                    self.jobs.append(int(json.loads(body)["id"]))
            except (OSError, http.client.HTTPException) as exc:
                outcome = type(exc).__name__
            self.samples.append((kind, started, time.monotonic() - started, outcome))
            if self.think_s > 0:
                time.sleep(self.think_s * self.random.uniform(0.5, 1.5))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Command(BaseCommand):
    help = "Load the web tier with N clients for D seconds (reads and submissions); write JSON results."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--clients", type=int, default=50)
        parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
        parser.add_argument("--warmup", type=float, default=5.0, help="seconds of load not measured")
        parser.add_argument("--url", default="", help="a running platform (default: start one)")
        parser.add_argument("--token", action="append", default=[], help="API token(s) for --url")
        parser.add_argument("--image", type=int, default=0, help="image id to submit (with --url)")
        parser.add_argument("--timeout", type=float, default=60.0, help="per-request timeout, s")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--think-time",
            type=float,
            default=0.0,
            help="mean seconds a client waits after each answer (uniform 0.5x-1.5x); 0 = closed loop",
        )
        parser.add_argument("--out", default="docs/results/load_embedded.json")
        parser.add_argument(
            "--database-url",
            default="",
            help="start the platform on this database (PostgreSQL) instead of the embedded SQLite",
        )
        parser.add_argument("--redis-url", default="", help="with --database-url: Redis as broker and cache")
        parser.add_argument(
            "--background-nice",
            type=int,
            default=None,
            help="passed to runplatform (niceness of its background workers; default: runplatform's)",
        )
        parser.add_argument(
            "--web-workers",
            type=int,
            default=0,
            help="passed to runplatform (gunicorn workers; 0: its default)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["clients"] < 1 or options["duration"] <= 0:
            raise CommandError("--clients must be >= 1 and --duration > 0")
        if options["think_time"] < 0:
            raise CommandError("--think-time must be >= 0")
        platform_process = None
        tmp = None
        try:
            if options["url"]:
                if not options["token"] or not options["image"]:
                    raise CommandError("--url needs --token (one or more) and --image")
                url = options["url"].rstrip("/")
                tokens, image, team = options["token"], options["image"], None
                var = None
            else:
                tmp = tempfile.TemporaryDirectory(prefix="loadtest-")
                var = Path(tmp.name) / "var"
                url, tokens, image, team, platform_process = self._start_embedded(
                    var,
                    options["clients"],
                    options["database_url"],
                    options["redis_url"],
                    platform_args=self._platform_args(options),
                )
            root = platform_process.pid if platform_process is not None else None
            result = self._run(url, tokens, image, team, options, root=root)
            if var is None:
                result["target"] = url
            elif options["database_url"]:
                result["target"] = "runplatform (gunicorn) on PostgreSQL"
            else:
                result["target"] = "embedded default (runplatform)"
            if var is not None:
                result["database_locked_in_logs"] = sum(
                    path.read_text(errors="replace").count("database is locked") for path in var.glob("*.log")
                )
            if platform_process is not None and platform_process.poll() is not None and var is not None:
                # The platform stopped during the load (runplatform stops everything when one child
                # dies): keep why, since its var/ is removed below.
                result["platform_exited"] = platform_process.returncode
                log = (var / "platform.log").read_text(errors="replace")
                result["platform_log_tail"] = log[-8000:]
                self.stderr.write(f"the platform exited with {platform_process.returncode} during the load")
        finally:
            if platform_process is not None:
                self._stop(platform_process)
            if tmp is not None:
                tmp.cleanup()
        out = Path(options["out"])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        overall = result["latency"]["all"]
        self.stdout.write(
            f"{result['requests']} requests in {result['measured_seconds']:.0f} s "
            f"({result['throughput_rps']:.1f}/s): p50 {overall['p50_ms']} ms, p99 {overall['p99_ms']} ms, "
            f"errors {result['errors']['total']}, 4xx {result['client_errors']}; wrote {out}"
        )

    # ------------------------------------------------------------------ the platform

    def _env(self, var: Path, database_url: str = "", redis_url: str = "") -> dict[str, str]:
        return platform_env(var, database_url, redis_url)

    def _manage(self, env: dict[str, str], *args: str) -> str:
        return manage(env, *args)

    @staticmethod
    def _platform_args(options: dict[str, Any]) -> list[str]:
        """The levers of runplatform a run sets; what it leaves out is runplatform's default."""
        args: list[str] = []
        if options.get("background_nice") is not None:
            args += ["--background-nice", str(options["background_nice"])]
        if options.get("web_workers"):
            args += ["--web-workers", str(options["web_workers"])]
        return args

    def _start_embedded(
        self,
        var: Path,
        clients: int,
        database_url: str = "",
        redis_url: str = "",
        platform_args: list[str] | None = None,
    ) -> tuple[str, list[str], int, int, subprocess.Popen[bytes]]:
        var.mkdir(parents=True)
        env = self._env(var, database_url, redis_url)
        self._manage(env, "migrate", "--noinput", "-v", "0")
        self._manage(env, "seed_demo")
        seeded = self._manage(env, "shell", "-c", SEED.format(clients=clients))
        data = json.loads(next(line for line in seeded.splitlines() if line.startswith("SEED "))[5:])
        port = _free_port()
        log = open(var / "platform.log", "wb")  # noqa: SIM115  (closed with the process)
        process = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "runplatform",
                "--no-seed",
                "--port",
                str(port),
                *(platform_args or []),
            ],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise CommandError(f"the platform exited with {process.returncode}; see its log")
            try:
                with urllib.request.urlopen(f"{url}/api/v1/health", timeout=2) as response:
                    if response.status == 200:
                        return url, data["tokens"], data["image"], data["team"], process
            except OSError:
                pass
            time.sleep(0.5)
        self._stop(process)
        raise CommandError("the platform did not answer /api/v1/health within 120 s")

    def _stop(self, process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # runplatform stops web, worker and beat
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    # ------------------------------------------------------------------ the load

    def _run(
        self,
        url: str,
        tokens: list[str],
        image: int,
        team: int | None,
        options: dict[str, Any],
        root: int | None = None,
    ) -> dict[str, Any]:
        parsed = urlparse(url)
        host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
        warmup, duration = float(options["warmup"]), float(options["duration"])
        # The box's load before our clients start: what other work already took of its cores.
        loadavg_at_start = round(os.getloadavg()[0], 2)
        begin = time.monotonic()
        measure_from = begin + warmup
        stop_at = measure_from + duration
        clients = [
            _Client(
                host=host,
                port=port,
                token=tokens[i % len(tokens)],
                image=image,
                team=team,
                stop_at=stop_at,
                seed=options["seed"] * 1000 + i,
                timeout=float(options["timeout"]),
                think_s=float(options["think_time"]),
            )
            for i in range(options["clients"])
        ]
        for client in clients:
            client.start()
        # CPU of the platform's processes (web, workers, beat) and of these clients over the measured
        # window only: what each part of the box took while the latencies were measured.
        time.sleep(max(0.0, measure_from - time.monotonic()))
        before, clients_before = role_usage(root), time.process_time()
        time.sleep(max(0.0, stop_at - time.monotonic()))
        after, clients_after = role_usage(root), time.process_time()
        for client in clients:
            client.join()
        # Keep only requests that started after the warm-up.
        by_kind: dict[str, list[float]] = defaultdict(list)
        statuses: Counter[str] = Counter()
        everything: list[float] = []
        for client in clients:
            for kind, started, elapsed, outcome in client.samples:
                if started < measure_from:
                    continue
                by_kind[kind].append(elapsed)
                everything.append(elapsed)
                statuses[str(outcome)] += 1
        transport = {k: v for k, v in statuses.items() if not k.isdigit()}
        server = {k: v for k, v in statuses.items() if k.isdigit() and k.startswith("5")}
        client_errors = sum(v for k, v in statuses.items() if k.isdigit() and k.startswith("4"))
        return {
            "benchmark": "api_load",
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commit": commit(),
            # Load average as the run ended: other work on the machine shares its cores.
            "machine": {
                "cpus": os.cpu_count(),
                "python": host_platform.python_version(),
                "loadavg_1m_at_start": loadavg_at_start,
                "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
            },
            "config": {
                "clients": options["clients"],
                "duration_s": duration,
                "warmup_s": warmup,
                "think_time_s": float(options["think_time"]),
                "mix_percent": dict(MIX),
                "web": "gunicorn (runplatform default)",
                # runplatform's levers as this run set them (absent: runplatform's defaults).
                "platform_args": self._platform_args(options),
                "database": "PostgreSQL" if options["database_url"] else "SQLite, WAL",
                # Connections per web process kept in a pool (config.env.database_from_url); 0 = a new
                # one per request. The platform started here reads the same environment variable.
                "database_pool_max_size": settings.DATABASE_POOL_MAX_SIZE if options["database_url"] else 0,
                "broker": "Redis" if options["redis_url"] else "file broker",
                "backend": "simulated",
            },
            "requests": len(everything),
            "measured_seconds": duration,
            "throughput_rps": round(len(everything) / duration, 1),
            "latency": {"all": latency_summary_ms(everything)}
            | {kind: latency_summary_ms(values) for kind, values in sorted(by_kind.items())},
            "status_counts": dict(sorted(statuses.items())),
            "niceness": {role: usage.nice for role, usage in after.items()},
            # Seconds each role was runnable but waited for a core during the measured window.
            "run_queue_wait_s": {
                role: round(usage.waited_s - (before[role].waited_s if role in before else 0.0), 2)
                for role, usage in after.items()
            },
            "cpu_s": cpu_split(
                {role: usage.cpu_s for role, usage in before.items()},
                {role: usage.cpu_s for role, usage in after.items()},
                clients_after - clients_before,
                len(everything),
            ),
            "errors": {"total": sum(transport.values()) + sum(server.values()), **transport, **server},
            "client_errors": client_errors,
        }

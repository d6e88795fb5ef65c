"""Harness of the reliability experiments: a whole platform in real processes, and the workloads that
try to break it. Used by the fault tests (tests/e2e/test_e2e_faults.py) and by the benchmark commands
(``manage.py faults``, ``manage.py overload``), which write docs/results/faults_*.json and
overload_*.json.

``Platform`` starts, as subprocesses sharing the caller's database: a Redis server of its own (on a
free port, nothing kept on disk, so a restart comes back empty), a web server (gunicorn), Celery
workers and beat, on the simulated cluster (state in a temporary folder). Jobs are submitted over HTTP
with a real API token, as a user would; the checks read the database and the cluster state directly.

Nothing here is imported by the platform itself.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import connection

from jobs.faults import POINTS
from jobs.models import Job, Task
from jobs.states import HOLDS_QUOTA, TERMINAL, JobStatus
from scheduler.model import Placement

REPO_ROOT = Path(__file__).resolve().parents[1]
FINAL = {s.value for s in TERMINAL}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def database_url() -> str:
    """The caller's database as a URL the subprocesses can use (PostgreSQL or a SQLite file)."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    host = s["HOST"] or "127.0.0.1"
    port = f":{s['PORT']}" if s["PORT"] else ""
    return f"postgres://{auth}@{host}{port}/{s['NAME']}"


@dataclass
class Platform:
    """A platform in subprocesses. ``workers`` maps a worker name to the queue kinds it serves."""

    tmp: Path
    interval_s: float = 1.0
    time_scale: float = 600.0
    workers: dict[str, list[str]] = field(
        default_factory=lambda: {"worker": ["cycle", "bind", "sync", "reconcile"]}
    )
    extra_env: dict[str, str] = field(default_factory=dict)
    worker_env: dict[str, str] = field(default_factory=dict)
    # Worker name -> Celery pool and concurrency; "solo" (one process, one task at a time) by default.
    pools: dict[str, tuple[str, int]] = field(default_factory=dict)
    web_workers: int = 2
    queue: str = ""
    redis_port: int = 0
    web_port: int = 0
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.queue = self.queue or f"rel-{os.getpid()}-{int(time.time() * 1000) % 10**8}"
        self.redis_port = self.redis_port or free_port()
        self.web_port = self.web_port or free_port()
        self.url = f"http://127.0.0.1:{self.web_port}"
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.fault_file = self.tmp / "fault"
        self.state_path = self.tmp / "cluster.json"

    # ------------------------------------------------------------------ processes

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "config.settings.test",
                "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "platform"), str(REPO_ROOT)]),
                "DATABASE_URL": database_url(),
                "REDIS_URL": self.redis_url,
                "CELERY_QUEUE": self.queue,
                "GPU_PLATFORM_VAR_DIR": str(self.tmp / "var"),
                "SIM_STATE_PATH": str(self.state_path),
                "SIM_CLUSTER": "demo",
                "SIM_TIME_SCALE": str(self.time_scale),
                "SCHEDULE_INTERVAL_SECONDS": str(self.interval_s),
                "RECONCILE_INTERVAL_SECONDS": str(self.interval_s),
                "CLUSTER_BACKEND": "simulated",
                "PYTHONUNBUFFERED": "1",
                "HEALTH_MAX_AGE_SECONDS": "60",
                # The burst and the fault workloads submit faster than a person: not what the write
                # throttle is for.
                "API_WRITE_THROTTLE_RATE": "1000000/minute",
            }
        )
        env.pop("FAULT_INJECT_FILE", None)
        env.update(self.extra_env)
        return env

    def _spawn(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115  (closed with the process)
        self.procs[name] = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=env or self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def start_redis(self) -> None:
        redis_server = shutil.which("redis-server")
        if redis_server is None:
            raise RuntimeError("redis-server is not installed")
        command = [redis_server, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", ""]
        self._spawn("redis", [*command, "--appendonly", "no", "--dir", str(self.tmp)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.redis_port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"redis-server did not start\n{self.logs(['redis'])}")

    def kill_redis(self) -> None:
        self._kill("redis", signal.SIGKILL)

    def worker_command(self, name: str) -> list[str]:
        queues = ",".join(f"{self.queue}.{kind}" for kind in self.workers[name])
        if "bind" in self.workers[name]:
            queues += f",{self.queue}"
        pool, concurrency = self.pools.get(name, ("solo", 1))
        return [
            sys.executable, "-m", "celery", "-A", "config", "worker", f"--pool={pool}", "-c", str(concurrency),
            "-Q", queues,
            "-n", f"{name}-{self.queue}@%h", "-l", "info", "--without-gossip", "--without-mingle",
            "--without-heartbeat",
        ]  # fmt: skip

    def start_worker(self, name: str) -> None:
        env = self.env()
        env.update(self.worker_env)
        env["FAULT_INJECT_FILE"] = str(self.fault_file)
        self._spawn(name, self.worker_command(name), env)

    def start(self) -> None:
        self.start_redis()
        self._spawn(
            "web",
            [
                sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{self.web_port}",
                "--workers", str(self.web_workers), "--threads", "4", "--timeout", "60",
            ],
        )  # fmt: skip
        for name in self.workers:
            self.start_worker(name)
        self._spawn(
            "beat",
            [
                sys.executable, "-m", "celery", "-A", "config", "beat", "-s", str(self.tmp / "celerybeat-schedule"),
                "-l", "warning",
            ],
        )  # fmt: skip
        self.wait_healthy()

    def _kill(self, name: str, sig: int) -> None:
        proc = self.procs.get(name)
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop(self) -> None:
        for name in list(self.procs):
            if name != "redis":
                self._kill(name, signal.SIGTERM)
        self._kill("redis", signal.SIGTERM)

    def alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def logs(self, names: Iterable[str] | None = None, chars: int = 3000) -> str:
        out = []
        for name in names or self.procs:
            path = self.tmp / f"{name}.log"
            text = path.read_text(errors="replace") if path.exists() else ""
            out.append(f"----- {name} (last {chars} chars) -----\n{text[-chars:]}")
        return "\n".join(out)

    # ------------------------------------------------------------------ HTTP

    def request(self, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Token {token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310  (our own server)
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                return err.code, json.loads(raw or b"null")
            except ValueError:
                return err.code, raw[:500]

    def wait_healthy(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited early\n{self.logs()}")
            try:
                if self.request("GET", "/api/v1/health")[0] == 200:
                    return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.3)
        raise RuntimeError(f"web never answered 200 on /api/v1/health\n{self.logs()}")

    def submit(self, token: str, spec: dict[str, Any]) -> int:
        for _ in range(20):
            code, body = self.request("POST", "/api/v1/jobs/", spec, token=token)
            if code == 201:
                return int(body["id"])
            if code not in (429, 502, 503):
                raise RuntimeError(f"submission refused: {code} {body}")
            time.sleep(0.5)
        raise RuntimeError(f"submission kept failing: {code} {body}")

    # ------------------------------------------------------------------ faults

    def kill_at(self, name: str, point: str, timeout: float = 20.0) -> bool:
        """Arm ``point`` and wait for worker ``name`` to die there; restart it. False if it never got
        there in ``timeout`` (nothing to do at that point right now): disarmed, nothing killed."""
        self.fault_file.write_text(point + "\n")
        deadline = time.monotonic() + timeout
        proc = self.procs[name]
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.start_worker(name)
                return True
            time.sleep(0.05)
        try:
            self.fault_file.unlink()
        except FileNotFoundError:
            # It fired just now.
            proc.wait(timeout=10)
            self.start_worker(name)
            return True
        return False


def seed_team(*, username: str = "reliability", slug: str = "reliability") -> str:
    """A team with room for any workload, a member and their API token (the raw key)."""
    from django.contrib.auth import get_user_model

    from accounts.models import Membership, Role, Team
    from accounts.services import token_create
    from images.models import JobImage
    from quotas.models import Quota

    team, _ = Team.objects.get_or_create(slug=slug, defaults={"name": slug.title()})
    big = 10_000_000
    Quota.objects.update_or_create(
        team=team,
        defaults={
            "max_gpu_milli": big,
            "per_user_gpu_milli": big,
            "max_concurrent_jobs": 1_000_000,
            "gpu_hours_per_month": 1e9,
        },
    )
    user = get_user_model().objects.filter(username=username).first() or get_user_model().objects.create_user(
        username, f"{username}@example.org", "reliability-password-1"
    )
    Membership.objects.get_or_create(user=user, team=team, defaults={"role": Role.MEMBER})
    JobImage.objects.get_or_create(name="pytorch", tag="2.4", defaults={"framework": "pytorch"})
    _, raw = token_create(user=user, name=f"reliability-{time.time():.0f}")
    return raw


# ---------------------------------------------------------------------- invariants


def _live_cluster_tasks(state_path: Path, time_scale: float) -> dict[str, Placement]:
    """The placements the cluster holds now, read through the backend itself (what a cycle sees)."""
    from scheduler.backends.simulated import SimulatedBackend

    backend = SimulatedBackend(state_path, cluster="demo", time_scale=time_scale)
    return {p.task_id: p for p in backend.snapshot().running}


def _over_allocated_once(state_path: Path, time_scale: float) -> set[str]:
    # The database first, then the cluster: a pending bind read first and bound since is found in
    # the cluster and counted once; a task that ended since is no longer live when the state is read.
    pending = list(
        Task.objects.filter(job__status=JobStatus.ADMITTED.value).values_list(
            "name", "node", "gpu_indices", "gpu_milli"
        )
    )
    live = _live_cluster_tasks(state_path, time_scale)
    used: dict[tuple[str, int], int] = defaultdict(int)
    for placement in live.values():
        for idx in placement.gpu_indices:
            used[placement.node, idx] += placement.gpu_milli
    for name, node, indices, milli in pending:
        if name in live:
            continue
        for idx in indices or []:
            used[node, int(idx)] += milli
    return {f"{node} GPU {idx}: {milli}" for (node, idx), milli in sorted(used.items()) if milli > 1000}


def over_allocated_gpus(state_path: Path, time_scale: float) -> list[str]:
    """GPUs given out beyond their capacity, counted as the scheduler must count them: every task live
    on the cluster (the source of truth for placements) plus every task of an ADMITTED job that the
    cluster does not show yet (decided, bind pending), summed per GPU. Empty when nothing is given
    out twice. (Task rows of RUNNING jobs are not used: the database lags the cluster by up to one
    sync, and a task that ended there has given its GPU back.) The two reads are not one snapshot, so
    a finding counts only if a second look a moment later confirms it: a real double allocation lasts
    as long as both jobs hold the GPU."""
    first = _over_allocated_once(state_path, time_scale)
    if not first:
        return []
    time.sleep(0.2)
    return sorted(first & _over_allocated_once(state_path, time_scale))


def jobs_bound_twice(state_path: Path, time_scale: float) -> list[str]:
    """Jobs whose live tasks on the cluster are more than their replicas (two runs at once)."""
    live = _live_cluster_tasks(state_path, time_scale)
    per_job = Counter(placement.job_id for placement in live.values())
    replicas = dict(
        Job.objects.filter(pk__in=[int(j) for j in per_job if j.isdigit()]).values_list("pk", "replicas")
    )
    return [
        f"job {j}: {n} live tasks" for j, n in per_job.items() if j.isdigit() and n > replicas.get(int(j), n)
    ]


def quota_mismatches() -> list[str]:
    """Teams whose quota usage differs from what their quota-holding jobs hold."""
    from quotas.models import Quota

    held: dict[int, int] = defaultdict(int)
    jobs: dict[int, int] = defaultdict(int)
    for job in Job.objects.filter(status__in=[s.value for s in HOLDS_QUOTA]):
        held[job.team_id] += job.total_gpu_milli
        jobs[job.team_id] += 1
    out = []
    for quota in Quota.objects.all():
        if (quota.used_gpu_milli, quota.used_jobs) != (held[quota.team_id], jobs[quota.team_id]):
            out.append(
                f"team {quota.team_id}: quota says {quota.used_gpu_milli} milli / {quota.used_jobs} jobs, "
                f"jobs hold {held[quota.team_id]} / {jobs[quota.team_id]}"
            )
    return out


def stuck_report(job_ids: list[int]) -> list[dict[str, Any]]:
    """What a person needs to see about jobs that did not end: state, age, last events, tasks."""
    from django.utils import timezone

    out = []
    for job in Job.objects.filter(pk__in=job_ids[:20]).prefetch_related("tasks"):
        events = list(
            job.events.order_by("-created_at", "-id")[:6].values_list("to_status", "actor", "reason")
        )
        out.append(
            {
                "job": job.pk,
                "status": job.status,
                "for_s": round((timezone.now() - job.updated_at).total_seconds(), 1),
                "events": events[::-1],
                "tasks": [(t.name, t.node, t.gpu_indices, t.phase, t.message[:120]) for t in job.tasks.all()],
            }
        )
    return out


def wait_final(job_ids: list[int], timeout: float, on_poll: Callable[[], None] | None = None) -> float:
    """Seconds until every job is final; raises TimeoutError with the stragglers' states."""
    start = time.monotonic()
    while True:
        statuses = dict(Job.objects.filter(pk__in=job_ids).values_list("pk", "status"))
        if all(statuses.get(j) in FINAL for j in job_ids):
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            stuck = [j for j in job_ids if statuses.get(j) not in FINAL]
            raise TimeoutError(
                f"{len(stuck)} job(s) not final after {timeout:.0f} s: {json.dumps(stuck_report(stuck), default=str)}"
            )
        if on_poll is not None:
            on_poll()
        time.sleep(0.5)


# ---------------------------------------------------------------------- workloads


def fault_workload_specs(n: int, *, duration_s: float) -> list[dict[str, Any]]:
    """``n`` jobs that keep the demo cluster (4 x 8 V100 + 4 x 2 T4) busy and queueing: shares, whole
    GPUs and multi-GPU gangs, with durations (simulated seconds) around ``duration_s``."""
    shapes: list[dict[str, Any]] = [
        {"gpu_milli": 250},
        {"gpus": 4},
        {"gpu_milli": 500, "gpu_memory_mib": 4096},
        {"gpus": 8},
        {"gpus": 2, "replicas": 2},
        {"gpus": 1},
    ]
    specs = []
    for i in range(n):
        spec: dict[str, Any] = {
            "name": f"fault-{i}",
            "image": "pytorch:2.4",
            "command": ["python", "train.py"],
        }
        spec.update(shapes[i % len(shapes)])
        spec["sim_duration_seconds"] = duration_s * (0.5 + (i * 7 % 10) / 10)
        specs.append(spec)
    return specs


@dataclass
class FaultRun:
    jobs: list[int]
    rounds: int
    kills: Counter[str]
    misses: Counter[str]
    over_allocated: list[str]
    bound_twice: list[str]
    quota_mismatches: list[str]
    final_after_last_kill_s: float
    outcome: dict[str, int]
    wall_s: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "jobs": len(self.jobs),
            "rounds": self.rounds,
            "kills": sum(self.kills.values()),
            "kills_by_point": dict(self.kills),
            "points_not_reached": dict(self.misses),
            "stranded": sum(v for k, v in self.outcome.items() if k not in FINAL),
            "outcome": self.outcome,
            "double_allocations": self.over_allocated,
            "jobs_bound_twice": self.bound_twice,
            "quota_mismatches": self.quota_mismatches,
            "final_after_last_kill_s": round(self.final_after_last_kill_s, 1),
            "wall_s": round(self.wall_s, 1),
        }


def run_fault_workload(
    platform: Platform,
    token: str,
    *,
    jobs: int,
    kills: int,
    duration_s: float,
    final_timeout_s: float,
    worker: str = "worker",
    max_rounds: int = 1,
    log: Callable[[str], None] = lambda s: None,
) -> FaultRun:
    """Submit ``jobs`` jobs, then kill ``worker`` ``kills`` times, cycling through the fault points;
    check allocations after every kill; then wait for every job to be final. When a round of jobs is
    all final before the kills are done, another round of ``jobs`` is submitted (up to
    ``max_rounds``)."""
    started = time.monotonic()
    ids = [platform.submit(token, spec) for spec in fault_workload_specs(jobs, duration_s=duration_s)]
    rounds = 1
    done: Counter[str] = Counter()
    missed: Counter[str] = Counter()
    over: list[str] = []
    cluster_over: list[str] = []
    point_index = 0
    attempts = 0
    while sum(done.values()) < kills and attempts < kills * 3:
        point = POINTS[point_index % len(POINTS)]
        point_index += 1
        attempts += 1
        hit = platform.kill_at(worker, point)
        if hit:
            done[point] += 1
        else:
            missed[point] += 1
        over += over_allocated_gpus(platform.state_path, platform.time_scale)
        cluster_over += jobs_bound_twice(platform.state_path, platform.time_scale)
        log(f"kill {sum(done.values())}/{kills} at {point} ({'hit' if hit else 'missed'})")
        if all(s in FINAL for s in Job.objects.filter(pk__in=ids).values_list("status", flat=True)):
            if rounds >= max_rounds:
                break  # no work left to be killed in
            rounds += 1
            ids += [
                platform.submit(token, spec) for spec in fault_workload_specs(jobs, duration_s=duration_s)
            ]

    def check() -> None:
        over.extend(over_allocated_gpus(platform.state_path, platform.time_scale))
        cluster_over.extend(jobs_bound_twice(platform.state_path, platform.time_scale))

    after = wait_final(ids, final_timeout_s, on_poll=check)
    outcome = Counter(Job.objects.filter(pk__in=ids).values_list("status", flat=True))
    return FaultRun(
        jobs=ids,
        rounds=rounds,
        kills=done,
        misses=missed,
        over_allocated=sorted(set(over)),
        bound_twice=sorted(set(cluster_over)),
        quota_mismatches=quota_mismatches(),
        final_after_last_kill_s=after,
        outcome=dict(outcome),
        wall_s=time.monotonic() - started,
    )


@dataclass
class RedisRestartRun:
    backlog: int
    reconnect_s: float
    placed_after_restart_s: float
    placed_after_reconnect_s: float
    beats_to_place: float
    outcome: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def run_redis_restart(
    platform: Platform, token: str, *, running: int, backlog: int, duration_s: float, final_timeout_s: float
) -> RedisRestartRun:
    """``running`` jobs run; the workers are paused while ``backlog`` more are submitted (their cycle
    messages wait in Redis); Redis is killed and restarted empty (messages, lease, flags gone); the
    workers resume. Measures how long until the backlog is placed."""
    base = {"image": "pytorch:2.4", "command": ["python", "train.py"], "gpu_milli": 500}
    first = [
        platform.submit(token, {**base, "name": f"run-{i}", "sim_duration_seconds": duration_s})
        for i in range(running)
    ]
    deadline = time.monotonic() + 60
    while Job.objects.filter(pk__in=first, status=JobStatus.RUNNING.value).count() < running:
        if time.monotonic() > deadline:
            raise TimeoutError("the first jobs never ran")
        time.sleep(0.3)
    paused = [name for name in platform.procs if name.startswith("worker") or name == "beat"]
    for name in paused:
        os.killpg(platform.procs[name].pid, signal.SIGSTOP)
    later = [
        platform.submit(token, {**base, "name": f"backlog-{i}", "sim_duration_seconds": duration_s})
        for i in range(backlog)
    ]
    platform.kill_redis()
    platform.start_redis()
    restarted = time.time()
    for name in paused:
        os.killpg(platform.procs[name].pid, signal.SIGCONT)
    placed_at = reconnected_at = None
    deadline = time.monotonic() + final_timeout_s
    while placed_at is None and time.monotonic() < deadline:
        if reconnected_at is None and any(
            (heartbeat_stamp := _stamp(platform, kind)) is not None and heartbeat_stamp >= restarted
            for kind in ("sync", "reconcile")
        ):
            reconnected_at = time.time()
        if not Job.objects.filter(pk__in=later, status=JobStatus.QUEUED.value).exists():
            placed_at = time.time()
        time.sleep(0.1)
    if placed_at is None:
        raise TimeoutError("the backlog was never placed after the Redis restart")
    reconnected_at = reconnected_at or placed_at
    wait_final(first + later, final_timeout_s)
    return RedisRestartRun(
        backlog=backlog,
        reconnect_s=reconnected_at - restarted,
        placed_after_restart_s=placed_at - restarted,
        placed_after_reconnect_s=max(0.0, placed_at - reconnected_at),
        beats_to_place=max(0.0, placed_at - reconnected_at) / platform.interval_s,
        outcome=dict(Counter(Job.objects.filter(pk__in=first + later).values_list("status", flat=True))),
    )


def _stamp(platform: Platform, kind: str) -> float | None:
    """A heartbeat as the platform's processes wrote it (in their Redis, not the caller's cache)."""
    import redis

    from jobs.heartbeat import stamp_key

    client = redis.Redis.from_url(platform.redis_url, socket_connect_timeout=1, socket_timeout=1)
    try:
        # Django's cache keys are ":<version>:<key>"; its values are pickled.
        value = client.get(f":1:{stamp_key(kind)}")
        raw = value.encode() if isinstance(value, str) else bytes(value or b"")
    except Exception:  # noqa: BLE001  (Redis restarting)
        return None
    if not raw:
        return None
    try:
        return float(pickle.loads(raw))  # noqa: S301  (our own Redis, our own values)
    except Exception:  # noqa: BLE001
        try:
            return float(raw)
        except ValueError:
            return None

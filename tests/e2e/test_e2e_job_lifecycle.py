"""End to end: real web server and real Celery worker (with beat) processes, Redis, the test database.

A researcher gets a token and submits a 250 milli-GPU job over HTTP; the worker runs scheduling
cycles, binds the job on the simulated cluster and syncs its status until it SUCCEEDS. Its events tell
the whole story and its quota is released. Nothing is eager or in-process: the test only talks HTTP
to the servers and reads the database they write.

Isolation: the servers use the database pytest-django created (the test is transactional, so they see
its rows), a Redis database of their own (15) with a queue name unique to this run, and a simulated
cluster state file in a temporary directory.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from accounts.models import Membership, Role, Team
from images.models import JobImage
from quotas.models import Quota, UsageEntry
from quotas.services import quota_ensure

REPO_ROOT = Path(__file__).resolve().parents[2]
E2E_REDIS_DB = 15
STORY = ["SUBMITTED", "QUEUED", "ADMITTED", "STARTING", "RUNNING", "SUCCEEDED"]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not os.environ.get("REDIS_URL"), reason="REDIS_URL is unset: the e2e test needs Redis"
    ),
]


def _redis_url_for_tests(url: str) -> str:
    parsed = urlparse(url)
    return urlunparse(parsed._replace(path=f"/{E2E_REDIS_DB}"))


def _database_url() -> str:
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    host = s["HOST"] or "127.0.0.1"
    port = f":{s['PORT']}" if s["PORT"] else ""
    return f"postgres://{auth}@{host}{port}/{s['NAME']}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Servers:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.queue = f"e2e-{uuid.uuid4().hex[:12]}"
        self.redis_url = _redis_url_for_tests(os.environ["REDIS_URL"])
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "config.settings.test",
                "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "platform"), str(REPO_ROOT)]),
                "DATABASE_URL": _database_url(),
                "REDIS_URL": self.redis_url,
                "CELERY_QUEUE": self.queue,
                "GPU_PLATFORM_VAR_DIR": str(self.tmp / "var"),
                "SIM_STATE_PATH": str(self.tmp / "cluster.json"),
                "SIM_CLUSTER": "demo",
                "SIM_TIME_SCALE": "600",
                "SCHEDULE_INTERVAL_SECONDS": "1",
                "CLUSTER_BACKEND": "simulated",
                "PYTHONUNBUFFERED": "1",
            }
        )
        return env

    def queues(self) -> str:
        # Every kind of work has its own queue (settings.PLATFORM_QUEUES): this one worker serves all.
        kinds = ("cycle", "bind", "sync", "reconcile")
        return ",".join([self.queue, *(f"{self.queue}.{kind}" for kind in kinds)])

    def start(self) -> None:
        commands = {
            "web": [sys.executable, "manage.py", "runserver", f"127.0.0.1:{self.port}", "--noreload"],
            "worker": [
                sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "-Q", self.queues(),
                "-B", "-s", str(self.tmp / "celerybeat-schedule"), "-l", "info",
            ],
        }  # fmt: skip
        for name, command in commands.items():
            log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115  (closed with the process)
            self.procs[name] = subprocess.Popen(
                command,
                cwd=REPO_ROOT,
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def logs(self) -> str:
        out = []
        for name in self.procs:
            text = (self.tmp / f"{name}.log").read_text(errors="replace")
            out.append(f"----- {name} (last 3000 chars) -----\n{text[-3000:]}")
        return "\n".join(out)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        try:
            import redis

            redis.Redis.from_url(self.redis_url).delete(*self.queues().split(","))
        except Exception:  # noqa: BLE001  (cleanup only)
            pass

    def request(self, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Token {token}")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"null")

    def wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                assert proc.poll() is None, f"{name} exited early\n{self.logs()}"
            try:
                if self.request("GET", "/api/v1/health")[0] == 200:
                    return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.3)
        raise AssertionError(f"web never answered 200 on /api/v1/health\n{self.logs()}")


@pytest.fixture
def servers(transactional_db: Any, tmp_path: Path) -> Iterator[Servers]:
    if connection.vendor != "postgresql":
        pytest.skip(
            "the e2e test shares the test database with server processes: set DATABASE_URL to PostgreSQL"
        )
    servers = Servers(tmp_path)
    servers.start()
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def demo_team(transactional_db: Any) -> Team:
    team = Team.objects.create(name="E2E team", slug="e2e")
    quota_ensure(team=team)
    user = get_user_model().objects.create_user("e2e-researcher", "r@example.org", "e2e-password-123")
    Membership.objects.create(user=user, team=team, role=Role.MEMBER)
    JobImage.objects.create(name="pytorch", tag="2.4", framework="pytorch")
    return team


def test_a_job_submitted_over_rest_runs_to_success_on_a_real_worker(
    servers: Servers, demo_team: Team
) -> None:
    servers.wait_healthy()
    code, body = servers.request(
        "POST", "/api/v1/auth/token/", {"username": "e2e-researcher", "password": "e2e-password-123"}
    )
    assert code == 201, body
    token = body["token"]

    code, job = servers.request(
        "POST",
        "/api/v1/jobs/",
        {"name": "e2e", "image": "pytorch:2.4", "command": ["python", "train.py"], "gpu_milli": 250},
        token=token,
    )
    assert code == 201, job
    job_id = job["id"]

    deadline = time.monotonic() + 120
    status = job["status"]
    while status not in ("SUCCEEDED", "FAILED", "STOPPED") and time.monotonic() < deadline:
        time.sleep(0.5)
        code, job = servers.request("GET", f"/api/v1/jobs/{job_id}/", token=token)
        assert code == 200, job
        status = job["status"]
    assert status == "SUCCEEDED", f"job ended as {status}: {job}\n{servers.logs()}"

    code, events = servers.request("GET", f"/api/v1/jobs/{job_id}/events/", token=token)
    assert code == 200
    story = [e["to_status"] for e in (events["results"] if isinstance(events, dict) else events)]
    assert [s for s in story if s in STORY] == STORY, story

    (task,) = job["tasks"]
    assert task["gpu_milli"] == 250 and task["phase"] == "SUCCEEDED"

    quota = Quota.objects.get(team=demo_team)
    assert (quota.used_gpu_milli, quota.used_jobs) == (0, 0)
    assert UsageEntry.objects.get(job_id=job_id).released_at is not None

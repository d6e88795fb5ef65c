"""A live platform for gpuctl: pytest-django's live server (real HTTP) on the simulated cluster.

There is no Celery worker in this process; ``Platform.drive()`` plays its part, running the real
scheduling cycle, binds and status syncs (jobs.scheduling, jobs.binding, jobs.sync) against the
same simulated backend the web server reads. The simulated clock is the real one, sped up
(``SIM_TIME_SCALE``), so jobs go from QUEUED to their end in about a second while gpuctl, a real
subprocess, talks HTTP to the server.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CLIENT_SRC = REPO / "client"
TIME_SCALE = 300.0  # 300 simulated seconds per real second

# On SQLite the live server's threads and this test share one in-memory connection (Django's
# connections_override), and two threads using one sqlite3 connection at once fail with "database
# table is locked". So every request, every chunk of a streamed answer and every drive() run under
# this lock: the database sees one user at a time, as it would through its own locking on a file.
DB_LOCK = threading.RLock()


class _LockedBody:
    """A WSGI answer whose chunks are produced (and whose close runs) under DB_LOCK."""

    def __init__(self, body: Any) -> None:
        self.body = body
        self.chunks = iter(body)

    def __iter__(self) -> Iterator[bytes]:
        while True:
            with DB_LOCK:
                try:
                    chunk = next(self.chunks)
                except StopIteration:
                    return
            yield chunk

    def close(self) -> None:
        with DB_LOCK:
            if hasattr(self.body, "close"):
                self.body.close()


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    # (seconds since start, line) of every stdout line, as it arrived
    lines: list[tuple[float, str]] = field(default_factory=list)


@dataclass
class Platform:
    url: str
    home: Path
    statuses: list[tuple[float, int, str]] = field(default_factory=list)

    def drive(self) -> None:
        """One round of the runtime: schedule, bind what was admitted, sync phases."""
        from jobs import binding, scheduling, sync
        from jobs.cluster import get_backend
        from jobs.models import Job

        with DB_LOCK:
            backend = get_backend()
            scheduling.run_scheduling_cycle(backend=backend)
            for job_id in Job.objects.filter(status="ADMITTED").values_list("pk", flat=True):
                binding.job_bind(job_id=job_id, backend=backend)
            sync.sync_status(backend=backend)
            now = time.monotonic()
            rows = list(Job.objects.values_list("pk", "status"))
        for job_id, status in rows:
            last = [s for _, j, s in self.statuses if j == job_id]
            if not last or last[-1] != status:
                self.statuses.append((now, job_id, status))

    def drive_until(self, job_id: int, statuses: set[str], timeout: float = 30.0) -> str:
        from jobs.models import Job

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.drive()
            with DB_LOCK:
                status = Job.objects.get(pk=job_id).status
            if status in statuses:
                return status
            time.sleep(0.05)
        raise AssertionError(f"job {job_id} did not reach {statuses} in {timeout} s")

    @contextlib.contextmanager
    def driving(self) -> Iterator[None]:
        """Keep the cluster running in a background thread (for in-process Client calls)."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                self.drive()
                stop.wait(0.05)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(30)

    def env(self, token: str | None = None, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCTL_")}
        env["PYTHONPATH"] = os.pathsep.join([str(CLIENT_SRC), env.get("PYTHONPATH", "")])
        env["GPUCTL_CONFIG"] = str(self.home / "gpuctl" / "config.json")
        env["GPUCTL_URL"] = self.url
        env["COLUMNS"] = "200"
        if token is not None:
            env["GPUCTL_TOKEN"] = token
        env.update(extra)
        return env

    def gpuctl(
        self,
        *args: str,
        token: str | None = None,
        stdin: str = "",
        drive: bool = True,
        timeout: float = 60.0,
        env: dict[str, str] | None = None,
    ) -> Result:
        """Run ``gpuctl ARGS`` as a subprocess; meanwhile (``drive``) keep the cluster running."""
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpuctl", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env or self.env(token),
            cwd=self.home,
        )
        started = time.monotonic()
        lines: list[tuple[float, str]] = []
        err: list[str] = []
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(stdin)
        proc.stdin.close()
        out_reader = threading.Thread(
            target=lambda: lines.extend((time.monotonic() - started, line) for line in proc.stdout or [])
        )
        err_reader = threading.Thread(target=lambda: err.append(proc.stderr.read() if proc.stderr else ""))
        out_reader.start()
        err_reader.start()
        try:
            while proc.poll() is None:
                if time.monotonic() - started > timeout:
                    proc.kill()
                    raise AssertionError(f"gpuctl {' '.join(args)} ran longer than {timeout} s")
                if drive:
                    self.drive()
                time.sleep(0.05)
        finally:
            out_reader.join(10)
            err_reader.join(10)
        return Result(
            code=proc.returncode,
            stdout="".join(line for _, line in lines),
            stderr="".join(err),
            lines=lines,
        )


@pytest.fixture
def sim_cluster(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo simulated cluster in a temporary state file, sped up; no Celery worker."""
    settings.CLUSTER_BACKEND = "simulated"
    settings.SIM_STATE_PATH = str(tmp_path / "cluster.json")
    settings.SIM_CLUSTER = "demo"
    settings.SIM_TIME_SCALE = TIME_SCALE
    settings.LOGS_FOLLOW_POLL_SECONDS = 0.1
    # Short, so the tests also see the client reconnect after the server's time bound.
    settings.LOGS_FOLLOW_MAX_SECONDS = 1.0
    settings.CACHES = {
        **settings.CACHES,
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": str(tmp_path)},
    }
    # No Celery worker: Platform.drive() runs cycles, binds and syncs itself.
    monkeypatch.setattr("jobs.dispatch._enqueue", lambda *args: None)
    return tmp_path


@pytest.fixture
def platform(live_server: Any, sim_cluster: Path, settings: Any) -> Iterator[Platform]:
    # The stream yields at least every poll, so it never holds DB_LOCK for longer than one poll.
    settings.LOGS_FOLLOW_KEEPALIVE_SECONDS = 0.1
    httpd = live_server.thread.httpd
    app = httpd.get_app()

    def locked_app(environ: dict[str, Any], start_response: Any) -> _LockedBody:
        with DB_LOCK:
            return _LockedBody(app(environ, start_response))

    httpd.set_app(locked_app)
    home = sim_cluster / "home"
    home.mkdir()
    try:
        yield Platform(url=live_server.url, home=home)
    finally:
        httpd.set_app(app)


@pytest.fixture
def token_of() -> Any:
    from accounts.services import token_create

    def make(user: Any) -> str:
        return token_create(user=user, name="gpuctl-test")[1]

    return make

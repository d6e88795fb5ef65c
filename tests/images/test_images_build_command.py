"""`images build` needs a Docker engine and says so in one line when there is none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

ROOT = Path(__file__).resolve().parents[2]


def run_manage(*args: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    full_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "GPU_PLATFORM_VAR_DIR": str(tmp_path / "var"),
        **env,
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("docker_host", ["unix://{tmp}/no-engine/docker.sock", "tcp://127.0.0.1:9"])
def test_build_without_an_engine_says_so_in_one_line_and_exits_non_zero(
    tmp_path: Path, docker_host: str
) -> None:
    host = docker_host.format(tmp=tmp_path)
    result = run_manage("images", "build", "pytorch", env={"DOCKER_HOST": host}, tmp_path=tmp_path)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"CommandError: no Docker engine reachable at {host}")
    assert "Traceback" not in result.stderr
    assert "building" not in result.stdout


def test_build_without_an_engine_raises_a_command_error_in_process(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    with pytest.raises(CommandError, match="no Docker engine reachable"):
        call_command("images", "build")


def test_build_refuses_an_unknown_image_before_contacting_the_engine(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    with pytest.raises(CommandError, match="unknown image 'pytorch2'.*pytorch-cpu"):
        call_command("images", "build", "pytorch2")


def test_push_needs_a_registry(monkeypatch) -> None:
    monkeypatch.delenv("GPU_PLATFORM_IMAGE_REGISTRY", raising=False)
    with pytest.raises(CommandError, match="--push needs --registry"):
        call_command("images", "build", "--push")


def test_an_invalid_dockerfile_directory_is_one_line(tmp_path: Path) -> None:
    result = run_manage(
        "images", "sync", "--dockerfiles", str(tmp_path / "missing"), env={}, tmp_path=tmp_path
    )
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        f"CommandError: {tmp_path / 'missing'}: no such Dockerfile directory"
    ]

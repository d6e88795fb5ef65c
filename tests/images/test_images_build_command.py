"""`images build` needs a Docker engine and says so in one line when there is none."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from images import builder
from images.catalog import DOCKERFILES_DIR
from images.models import JobImage

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


class RecordingEngine:
    """Just enough of docker.DockerClient for `images build`: remembers each build and smoke test."""

    def __init__(self) -> None:
        self.builds: list[dict[str, Any]] = []
        self.runs: list[dict[str, Any]] = []
        self.api = SimpleNamespace(build=self._build)
        self.images = SimpleNamespace(get=lambda ref: SimpleNamespace(id=f"sha256:{len(self.builds)}"))
        self.containers = SimpleNamespace(run=self._run)

    def _build(self, *, fileobj: io.BytesIO, **kwargs: Any) -> Iterator[dict[str, str]]:
        with tarfile.open(fileobj=fileobj) as tar:
            member = tar.extractfile("Dockerfile")
            assert member is not None
            self.builds.append({**kwargs, "dockerfile": member.read().decode()})
        return iter([{"stream": "Successfully built\n"}])

    def _run(self, reference: str, **kwargs: Any) -> SimpleNamespace:
        self.runs.append({"reference": reference, **kwargs})
        return SimpleNamespace(
            wait=lambda timeout: {"StatusCode": 0}, logs=lambda **_: b"ok\n", remove=lambda force: None
        )


@pytest.mark.django_db
def test_building_the_cpu_base_sends_the_base_folder_with_its_variant_arguments(monkeypatch) -> None:
    engine = RecordingEngine()
    monkeypatch.setattr(builder, "connect", lambda: engine)
    monkeypatch.delenv("GPU_PLATFORM_IMAGE_REGISTRY", raising=False)
    call_command("images", "build", "pytorch-cpu", "--registry", "reg.io/acme", stdout=io.StringIO())

    assert [b["tag"] for b in engine.builds] == [
        "reg.io/acme/gpu-platform/base-cpu:cpu-py3.10",
        "reg.io/acme/gpu-platform/pytorch-cpu:2.5.1-cpu-py3.10",
    ]
    base, pytorch = engine.builds
    assert base["dockerfile"] == (DOCKERFILES_DIR / "base" / "Dockerfile").read_text()
    assert base["buildargs"]["BASE_IMAGE"] == "ubuntu:22.04"
    assert base["buildargs"]["ACCELERATOR"] == "cpu"
    # The root image comes from its own registry; the framework image from the base just built.
    assert (base["pull"], pytorch["pull"]) == (True, False)
    assert pytorch["buildargs"]["BASE_IMAGE"] == "reg.io/acme/gpu-platform/base-cpu:cpu-py3.10"
    assert [run["device_requests"] for run in engine.runs] == [None, None]
    assert engine.runs[0]["command"] == ["/opt/gpu-platform/smoke-test/base.sh"]
    row = JobImage.objects.get(name="gpu-platform/base-cpu")
    assert (row.image_id, row.dockerfile) == ("sha256:1", "images/dockerfiles/base/Dockerfile")

"""Build, smoke-test and push catalog images through the Docker SDK (the ``docker`` package).

Glue only: what to build and with which arguments is decided by :mod:`images.catalog`; what is
recorded afterwards by :mod:`images.services`. Every failure surfaces as :class:`BuildError` with a
one-line message a person can act on.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import tarfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound

from images.catalog import CatalogImage

# The throughput helper every image installs (images/gpu_platform): added to each build context as
# ``gpu_platform/``, since a Dockerfile cannot COPY from outside its own folder.
HELPER_DIR = Path(__file__).resolve().parent / "gpu_platform"
HELPER_CONTEXT_NAME = "gpu_platform"

# NCCL and gloo exchange data through /dev/shm; Docker's default 64 MiB is too small for them.
SMOKE_TEST_SHM = "2g"


class BuildError(Exception):
    """A build step failed; ``str()`` is one line."""


class EngineUnavailable(BuildError):
    """No Docker engine answers where DOCKER_HOST (or the default socket) points."""


def _one_line(exc: BaseException | str, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def connect(timeout: int = 30) -> docker.DockerClient:
    """A client for the engine named by the environment (DOCKER_HOST, ...), checked with a ping."""
    where = os.environ.get("DOCKER_HOST") or "the default socket (unix:///var/run/docker.sock)"
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except (DockerException, requests.RequestException, OSError) as exc:
        raise EngineUnavailable(
            f"no Docker engine reachable at {where}: start Docker or point DOCKER_HOST at one "
            f"({_one_line(exc, 160)})"
        ) from None
    return client


def build_context(context_dir: Path) -> io.BytesIO:
    """The image's folder plus the helper package under ``gpu_platform/``, as an uncompressed tar."""

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts
        return None if "__pycache__" in parts or any(p.endswith(".egg-info") for p in parts) else info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(context_dir.iterdir()):
            tar.add(path, arcname=path.name, filter=clean)
        tar.add(HELPER_DIR, arcname=HELPER_CONTEXT_NAME, filter=clean)
    buffer.seek(0)
    return buffer


def build(
    client: docker.DockerClient,
    image: CatalogImage,
    *,
    reference: str,
    build_args: Mapping[str, str],
    no_cache: bool = False,
    log: Callable[[str], None] = lambda line: None,
) -> str:
    """Build ``image`` from its directory, tag it ``reference``; returns the image ID (sha256:...)."""
    # Pull newer root images only: a child's BASE_IMAGE is the parent we just built, which may exist
    # nowhere but on this engine.
    pull = image.parent is None
    try:
        stream = client.api.build(
            fileobj=build_context(image.context_dir),
            custom_context=True,
            tag=reference,
            buildargs=dict(build_args),
            rm=True,
            forcerm=True,
            pull=pull,
            nocache=no_cache,
            decode=True,
        )
        for chunk in stream:
            if "error" in chunk:
                raise BuildError(f"building {reference} failed: {_one_line(chunk['error'])}")
            text = chunk.get("stream", "")
            for line in text.splitlines():
                if line.strip():
                    log(line)
        return str(client.images.get(reference).id)
    except (APIError, ImageNotFound, requests.RequestException) as exc:
        raise BuildError(f"building {reference} failed: {_one_line(exc)}") from None


def smoke_test(
    client: docker.DockerClient,
    image: CatalogImage,
    *,
    reference: str,
    gpus: bool,
    timeout_s: int = 900,
) -> str:
    """Run the image's smoke test (label ``org.gpu-platform.smoke-test``) in a fresh container.

    With ``gpus`` every GPU of the engine is requested and the test must find one (``--require-gpu``).
    Returns the output; raises :class:`BuildError` naming the first failed check otherwise.
    """
    command = shlex.split(image.smoke_test) + (["--require-gpu"] if gpus else [])
    requests_ = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])] if gpus else None
    try:
        container = client.containers.run(
            reference, command=command, detach=True, device_requests=requests_, shm_size=SMOKE_TEST_SHM
        )
    except APIError as exc:
        hint = " (no GPU runtime on this engine? rerun with --no-gpu)" if gpus else ""
        raise BuildError(f"smoke test of {reference} could not start: {_one_line(exc)}{hint}") from None
    try:
        try:
            status = int(container.wait(timeout=timeout_s).get("StatusCode", -1))
        except requests.RequestException:
            container.kill()
            raise BuildError(f"smoke test of {reference} ran over {timeout_s}s and was killed") from None
        output = container.logs(stdout=True, stderr=True).decode(errors="replace")
    finally:
        # Already gone is fine: nothing of value is left to clean up.
        with contextlib.suppress(DockerException):
            container.remove(force=True)
    if status != 0:
        failed = [line for line in output.splitlines() if line.startswith("FAIL")]
        detail = failed[0] if failed else (output.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"smoke test of {reference} failed (exit {status}): {_one_line(detail)}")
    return output


def push(client: docker.DockerClient, reference: str) -> str:
    """Push ``reference``; returns the registry's manifest digest (sha256:...)."""
    repository, _, tag = reference.rpartition(":")
    digest = ""
    try:
        for chunk in client.api.push(repository, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                raise BuildError(f"pushing {reference} failed: {_one_line(chunk['error'])}")
            aux: dict[str, Any] = chunk.get("aux") or {}
            digest = aux.get("Digest", digest)
    except (APIError, requests.RequestException) as exc:
        raise BuildError(f"pushing {reference} failed: {_one_line(exc)}") from None
    if not digest:
        raise BuildError(f"pushing {reference}: the registry reported no digest")
    return digest

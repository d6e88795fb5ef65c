"""Docker engine access for the local backend: is an engine reachable, does it hold an image.

Only the backend's bind calls this (the runner talks to the engine itself). Errors are one line, so
that a job refused for this reason shows a message a person can act on.
"""

from __future__ import annotations

import os
import re
from typing import Any

DEFAULT_SOCKET = "unix:///var/run/docker.sock"
CONTAINER_MODES = ("never", "auto", "always")
_NAME_INVALID = re.compile(r"[^a-zA-Z0-9_.-]+")


class DockerUnavailable(RuntimeError):
    """No Docker engine answered; ``str()`` is one line."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def engine_address(docker_host: str = "") -> str:
    return docker_host or os.environ.get("DOCKER_HOST", "") or DEFAULT_SOCKET


def connect(docker_host: str = "", *, timeout: float = 5.0) -> Any:
    """A pinged ``docker.DockerClient``; raises DockerUnavailable (one line) when there is none."""
    where = engine_address(docker_host)
    try:
        import docker
    except ImportError as exc:
        raise DockerUnavailable(f"the docker Python package is not installed ({exc})") from None
    try:
        client = docker.DockerClient(base_url=where, timeout=int(timeout))
        client.ping()
    except Exception as exc:  # noqa: BLE001  (docker raises DockerException, requests errors, OSError)
        raise DockerUnavailable(f"no Docker engine reachable at {where}: {_one_line(exc)}") from None
    return client


def has_image(client: Any, image: str) -> bool:
    try:
        client.images.get(image)
    except Exception:  # noqa: BLE001  (ImageNotFound or an API error: either way, not usable here)
        return False
    return True


def container_name(job_id: str, task_id: str) -> str:
    """Deterministic, valid Docker container name of a task."""
    return _NAME_INVALID.sub("-", f"gpu-platform-{job_id}-{task_id}")[:128]

"""Workspaces on the local backend (docs/workspaces.md): the server binds 127.0.0.1 on a free port,
its files live in a home folder per team and user that outlives every run, and the address it serves
is recorded in the task's file for the platform's proxy.

A workspace's task carries the platform's variables (``GPU_PLATFORM_WORKSPACE_*``); their names are
repeated here, as scheduler/ cannot import the Django side that sets them.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path

HOST = "GPU_PLATFORM_WORKSPACE_HOST"
PORT = "GPU_PLATFORM_WORKSPACE_PORT"
HOME = "GPU_PLATFORM_WORKSPACE_HOME"
LOGDIR = "GPU_PLATFORM_WORKSPACE_LOGDIR"
LOGS_OF = "GPU_PLATFORM_WORKSPACE_LOGS_OF"
# Where a job's image writes TensorBoard event files, under its CHECKPOINT_DIR (docs/workspaces.md).
TENSORBOARD_FOLDER = "tensorboard"
HOMES_DIR = "homes"

# Kubernetes' reference syntax in command and args: $(NAME) is the variable's value when it is set,
# $$ is a literal $, anything else stays as written.
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def is_workspace(env: Mapping[str, str]) -> bool:
    return PORT in env


def expand_references(argv: Iterable[str], env: Mapping[str, str]) -> list[str]:
    """``argv`` with ``$(NAME)`` replaced as the kubelet replaces it, so one command serves both."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return [_REFERENCE.sub(one, arg) for arg in argv]


def free_port(taken: Iterable[int] = ()) -> int:
    """A port of 127.0.0.1 nothing listens on now and no other live workspace was given."""
    avoid = set(taken)
    for _ in range(20):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in avoid:
            return port
    raise OSError("no free port on 127.0.0.1")


def home_dir(work_dir: Path, team_folder: str, user_folder: str) -> Path:
    """The user's home folder in the team: the same for every workspace they start there, so a
    culled or stopped notebook's files are there again when they start a new one."""
    return work_dir / HOMES_DIR / team_folder / user_folder


def target(port: int) -> str:
    return f"http://127.0.0.1:{port}"

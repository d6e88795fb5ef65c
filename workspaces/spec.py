"""What ``kind: workspace`` fills in when the submission leaves it out (docs/workspaces.md). Pure: no
database. Applied to the raw submission before its shapes are checked (jobs.validation), so the REST
API, the portal's form, its YAML import and gpuctl get the same defaults.

The default commands take their address from the platform's variables with Kubernetes' ``$(NAME)``
references: the local backend expands them as the kubelet does (scheduler.backends.local.workspace),
so one stored command serves both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A quarter of a GPU, and the GPU memory that goes with it on a 16 GiB card: notebooks are mostly idle.
DEFAULT_GPU_MILLI = 250
DEFAULT_GPU_MEMORY_MIB = 4096
SIM_WORKSPACE_SECONDS = 8 * 3600.0
DEFAULT_PORTS = {"jupyterlab": 8888, "tensorboard": 6006, "http": 8080}

# Set by the platform on every workspace's task (jobs.binding via workspaces.access.workspace_env).
HOST = "GPU_PLATFORM_WORKSPACE_HOST"
PORT = "GPU_PLATFORM_WORKSPACE_PORT"
BASE_URL = "GPU_PLATFORM_WORKSPACE_BASE_URL"
HOME = "GPU_PLATFORM_WORKSPACE_HOME"
LOGDIR = "GPU_PLATFORM_WORKSPACE_LOGDIR"
LOGS_OF = "GPU_PLATFORM_WORKSPACE_LOGS_OF"

DEFAULT_COMMANDS: dict[str, list[str]] = {
    # The token comes in JUPYTER_TOKEN, never on the command line (which `ps` shows to everyone).
    "jupyterlab": [
        "jupyter", "lab", "--no-browser",
        f"--ServerApp.ip=$({HOST})", f"--ServerApp.port=$({PORT})",
        f"--ServerApp.base_url=$({BASE_URL})", f"--ServerApp.root_dir=$({HOME})",
    ],
    "tensorboard": [
        "tensorboard", f"--logdir=$({LOGDIR})", f"--host=$({HOST})", f"--port=$({PORT})",
        f"--path_prefix=$({BASE_URL})",
    ],
}  # fmt: skip


def with_workspace_defaults(data: Any) -> Any:
    """``data`` with a workspace's defaults filled in where it leaves a field out; anything else
    (a batch job, not a mapping) unchanged. Explicit values, also wrong ones, are kept for the checks."""
    if not isinstance(data, Mapping) or data.get("kind") != "workspace":
        return data
    filled = dict(data)
    app = filled.setdefault("workspace_app", "jupyterlab")
    if isinstance(app, str) and app in DEFAULT_PORTS:
        filled.setdefault("workspace_port", DEFAULT_PORTS[app])
    if isinstance(app, str) and app in DEFAULT_COMMANDS and not filled.get("command"):
        filled["command"] = list(DEFAULT_COMMANDS[app])
    if "gpus" not in filled and "gpu_milli" not in filled and filled.get("gpu_request") in (None, "share"):
        filled["gpu_milli"] = DEFAULT_GPU_MILLI
        filled.setdefault("gpu_memory_mib", DEFAULT_GPU_MEMORY_MIB)
        filled.setdefault("gpu_request", "share")
    # Stopping a notebook loses its kernels' state: only the owner may say it can be preempted.
    filled.setdefault("preemptible", False)
    # The simulated cluster ends every task after its simulated duration: a working day, for a
    # workspace (the other backends ignore the field; a workspace there runs until stopped or culled).
    filled.setdefault("sim_duration_seconds", SIM_WORKSPACE_SECONDS)
    return filled


def base_url(job_id: int | str) -> str:
    """Where the platform's proxy serves the workspace, and so the app's own base URL."""
    return f"/workspaces/{job_id}/"

"""The environment a local task starts with: a clean base, the user's variables, then the platform's.

Contract (the local form of DESIGN.md §4, matching scheduler.backends.kubernetes.contract):

- ``CUDA_VISIBLE_DEVICES`` and ``NVIDIA_VISIBLE_DEVICES``: the assigned GPU indices, e.g. ``"2"`` or
  ``"0,1"`` (with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so CUDA numbers GPUs as NVML and nvidia-smi do). In
  a container the NVIDIA runtime exposes only the assigned GPUs, renumbered from 0, so there
  ``CUDA_VISIBLE_DEVICES`` is ``0..n-1`` while ``NVIDIA_VISIBLE_DEVICES`` keeps the host indices. A task
  without GPUs gets ``CUDA_VISIBLE_DEVICES=""`` (CUDA sees none) and ``NVIDIA_VISIBLE_DEVICES=void``.
- A share of one GPU (``0 < gpu_milli < 1000``): ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = ceil(milli/10)``
  (at least 1) and, when GPU memory was asked, ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT = "0=<MiB>M"``. The
  ordinal is the device as the task sees it: CUDA numbers the devices of ``CUDA_VISIBLE_DEVICES`` from 0,
  so the one shared GPU is always ``0`` (the host index is in ``GPU_PLATFORM_GPU_INDICES``). MPS only
  enforces these when an MPS control daemon runs on the machine; without one they are advisory.
- ``GPU_PLATFORM_*``: the host indices, UUIDs, milli-GPU and GPU memory, for the task's own logging.
- Jobs of more than one task: ``MASTER_ADDR=127.0.0.1``, ``MASTER_PORT`` (one free port per job),
  ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK`` (= ``RANK``: every task runs on this machine),
  ``LOCAL_WORLD_SIZE``, ``NODE_RANK=0`` (what ``torch.distributed``'s ``env://`` init reads).
- Checkpoints (DESIGN.md §5b): ``CHECKPOINT_DIR`` (the job's folder kept across its runs),
  ``RESUME=1`` on every run after the first, ``PREEMPTION_GRACE_SECONDS`` (SIGTERM to SIGKILL).
- ``TMPDIR``: a private folder of the run; with a job user also ``HOME`` (the task's work folder),
  ``USER`` and ``LOGNAME``.
- Loader variables (``scheduler.backends.base.is_loader_env``) never reach a task from the job's env.
- A workspace's task (one with ``GPU_PLATFORM_WORKSPACE_PORT``): the folders of the platform's
  ``LOCAL_WORKSPACE_PATH`` first on ``PATH`` (``make run`` as root sets it to a JupyterLab the job user
  can run: jobs.workspace_runtime).

The base is *not* the platform's environment (it holds database URLs and secret keys): only the
variables named in ``PASSTHROUGH`` (or given by the operator) are copied from it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping

from scheduler.backends.base import TaskSpec, is_loader_env
from scheduler.backends.local.workspace import PORT as WORKSPACE_PORT
from scheduler.model import GPU_MILLI, Placement

PASSTHROUGH: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_MPS_PIPE_DIRECTORY",
    "CUDA_MPS_LOG_DIRECTORY",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "CONDA_PREFIX",
    "VIRTUAL_ENV",
    "HF_HOME",
    "TORCH_HOME",
)
PASSTHROUGH_PREFIXES: tuple[str, ...] = ("LC_",)
WORKSPACE_PATH = "LOCAL_WORKSPACE_PATH"


def base_environment(source: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The variables of ``source`` a task may inherit (``PASSTHROUGH``, ``LC_*`` and ``extra``)."""
    names = set(PASSTHROUGH) | set(extra)
    return {k: v for k, v in source.items() if k in names or k.startswith(PASSTHROUGH_PREFIXES)}


def mps_percentage(gpu_milli: int) -> int:
    """``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` for a share: milli/10 rounded up, at least 1."""
    return max(1, math.ceil(gpu_milli / 10))


def gpu_environment(placement: Placement, uuids: Mapping[int, str], *, container: bool) -> dict[str, str]:
    """The variables that carry the GPU assignment (see the module docstring)."""
    indices = [str(i) for i in placement.gpu_indices]
    if not indices:
        return {"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"}
    env = {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(len(indices)))
        if container
        else ",".join(indices),
        "NVIDIA_VISIBLE_DEVICES": ",".join(indices),
        "GPU_PLATFORM_GPU_INDICES": ",".join(indices),
        "GPU_PLATFORM_GPU_UUIDS": ",".join(uuids.get(i, "") for i in placement.gpu_indices),
        "GPU_PLATFORM_GPU_MILLI": str(placement.gpu_milli or GPU_MILLI),
    }
    if 0 < placement.gpu_milli < GPU_MILLI:
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(mps_percentage(placement.gpu_milli))
        if placement.gpu_memory_mib:
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={placement.gpu_memory_mib}M"
            env["GPU_PLATFORM_GPU_MEMORY_MIB"] = str(placement.gpu_memory_mib)
    return env


def distributed_environment(spec: TaskSpec, master_port: int | None) -> dict[str, str]:
    """``torch.distributed`` rendezvous variables for a job of more than one task (else empty)."""
    if spec.world_size <= 1 or master_port is None:
        return {}
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master_port),
        "WORLD_SIZE": str(spec.world_size),
        "RANK": str(spec.rank),
        "LOCAL_RANK": str(spec.rank),
        "LOCAL_WORLD_SIZE": str(spec.world_size),
        "NODE_RANK": "0",
    }


def task_environment(
    spec: TaskSpec,
    placement: Placement,
    *,
    uuids: Mapping[int, str],
    master_port: int | None,
    container: bool = False,
    source: Mapping[str, str] | None = None,
    passthrough: Iterable[str] = (),
    checkpoint_dir: str = "",
    tmp_dir: str = "",
    identity: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Base, then the user's ``spec.env``, then the platform's variables (which win: a user value
    for ``RANK`` or ``CUDA_VISIBLE_DEVICES`` would break the job or GPU isolation).

    ``identity`` (``HOME``, ``USER``, ``LOGNAME`` of the job user) replaces the platform's own: a job
    running as another user must not be pointed at the platform's home."""
    env = {} if container else base_environment(os.environ if source is None else source, passthrough)
    env.update(identity or {})
    env.setdefault("PYTHONUNBUFFERED", "1")  # so print() reaches the log while the job runs
    # Submission refuses these; dropping them here too covers jobs stored before that check.
    env.update({str(k): str(v) for k, v in spec.env.items() if not is_loader_env(str(k))})
    if WORKSPACE_PORT in spec.env and not container:
        env["PATH"] = workspace_path(
            env.get("PATH", ""), (os.environ if source is None else source).get(WORKSPACE_PATH, "")
        )
    env.update(gpu_environment(placement, uuids, container=container))
    env.update(distributed_environment(spec, master_port))
    env["GPU_PLATFORM_JOB_ID"] = spec.job_id
    env["GPU_PLATFORM_TASK_ID"] = spec.task_id
    env.update(checkpoint_environment(spec, checkpoint_dir))
    if tmp_dir:
        env["TMPDIR"] = tmp_dir
    return env


def checkpoint_environment(spec: TaskSpec, checkpoint_dir: str) -> dict[str, str]:
    """``CHECKPOINT_DIR``, ``RESUME`` (only on a resumed run) and ``PREEMPTION_GRACE_SECONDS``."""
    env = {"PREEMPTION_GRACE_SECONDS": f"{spec.grace_seconds:g}"}
    if checkpoint_dir:
        env["CHECKPOINT_DIR"] = checkpoint_dir
    if spec.resume:
        env["RESUME"] = "1"
    return env


def workspace_path(path: str, extra: str) -> str:
    """``path`` with the folders of ``extra`` (a PATH-style list) first, each once."""
    first = [e for e in extra.split(os.pathsep) if e]
    return os.pathsep.join([*first, *(e for e in path.split(os.pathsep) if e and e not in first)])

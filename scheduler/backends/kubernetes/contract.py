"""The platform's Kubernetes contract: label and annotation keys, names, and the GPU environment.

Everything the scheduler, the node agent and outside users agree on lives here, so one module documents
the wire format (see docs/kubernetes.md). Keys use the ``gpu-platform.io/`` prefix; where a widely used
convention exists we also read or write it:

- KAI-Scheduler: pod annotations ``gpu-fraction`` (0..1) and ``gpu-memory`` (MiB) ask for a GPU share;
- HAMi: containers get ``CUDA_DEVICE_MEMORY_LIMIT_<i>`` and ``CUDA_DEVICE_SM_LIMIT`` (percent);
- NVIDIA MPS: ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` and ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``;
- NVIDIA GPU feature discovery: node labels ``nvidia.com/gpu.product``, ``nvidia.com/gpu.memory``,
  ``nvidia.com/gpu.count`` are a fallback when our agent has not published yet.
"""

from __future__ import annotations

import hashlib
import json
import math
import re

from scheduler.model import GPU_MILLI, Placement

PREFIX = "gpu-platform.io/"

# Pod labels (selectable, short values).
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gpu-platform"
LABEL_JOB = PREFIX + "job"
LABEL_TASK = PREFIX + "task"

# Pod annotations: the assignment, readable back after a restart (DESIGN.md §3, §4).
ANN_JOB_ID = PREFIX + "job-id"
ANN_TASK_ID = PREFIX + "task-id"
ANN_RANK = PREFIX + "rank"
ANN_WORLD_SIZE = PREFIX + "world-size"
ANN_NODE = PREFIX + "node"
ANN_GPU_INDICES = PREFIX + "gpu-indices"
ANN_GPU_UUIDS = PREFIX + "gpu-uuids"
ANN_GPU_MILLI = PREFIX + "gpu-milli"
ANN_GPU_MEMORY_MIB = PREFIX + "gpu-memory-mib"
ANN_GPUS = PREFIX + "gpus"
ANN_VISIBLE_DEVICES = PREFIX + "nvidia-visible-devices"
ANN_PLACEMENT = PREFIX + "placement"
ANN_GANG = PREFIX + "gang"
ANN_TEAM = PREFIX + "team"
ANN_USER = PREFIX + "user"
# Set on a pod just before preempt_job deletes it: its grace seconds. A pod that goes away carrying it
# was preempted (its job will resume), not lost.
ANN_PREEMPTED = PREFIX + "preempted"
ANN_RESUME = PREFIX + "resume"
# KAI-Scheduler's request annotations, accepted on outside pods.
KAI_GPU_FRACTION = "gpu-fraction"
KAI_GPU_MEMORY = "gpu-memory"

# Node labels and annotations published by the node agent.
NODE_LABEL_GPU_PRESENT = PREFIX + "gpu.present"
NODE_LABEL_GPU_COUNT = PREFIX + "gpu.count"
NODE_LABEL_GPU_MODEL = PREFIX + "gpu.model"
NODE_LABEL_GPU_MEMORY_MIB = PREFIX + "gpu.memory-mib"
NODE_LABEL_DRIVER = PREFIX + "driver-version"
NODE_LABEL_CUDA = PREFIX + "cuda-version"
NODE_ANN_GPUS = PREFIX + "gpus"
NODE_ANN_TOPOLOGY = PREFIX + "topology"
NODE_ANN_HEARTBEAT = PREFIX + "heartbeat"
GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_MEMORY = "nvidia.com/gpu.memory"
GFD_COUNT = "nvidia.com/gpu.count"
DEVICE_PLUGIN_RESOURCE = "nvidia.com/gpu"

_INVALID = re.compile(r"[^a-z0-9-]+")
_LABEL_INVALID = re.compile(r"[^A-Za-z0-9._-]+")


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def dns_label(*parts: str, prefix: str = "") -> str:
    """A deterministic RFC 1123 label (<= 63 chars) for ``parts``.

    Lowercases and replaces anything else than ``[a-z0-9-]`` with ``-``; when that changed the text or
    it is too long, a hash of the original is appended so distinct ids never collide.
    """
    original = "-".join(p for p in parts if p)
    cleaned = _INVALID.sub("-", (prefix + original).lower()).strip("-")
    if cleaned == prefix + original and len(cleaned) <= 63:
        return cleaned
    return f"{cleaned[:52].rstrip('-')}-{_digest(original)}".lstrip("-")


def label_value(text: str) -> str:
    """A valid label value (<= 63 chars of ``[A-Za-z0-9._-]``, alphanumeric ends) for ``text``."""
    cleaned = _LABEL_INVALID.sub("-", text).strip("-._")
    if cleaned == text and len(cleaned) <= 63:
        return cleaned
    return f"{cleaned[:52].rstrip('-._')}-{_digest(text)}".lstrip("-._")


def pod_name(job_id: str, task_id: str) -> str:
    """The pod of a task; task ids that already start with the job id are not repeated."""
    if task_id.startswith(job_id):
        return dns_label(task_id, prefix="job-")
    return dns_label(job_id, task_id, prefix="job-")


def service_name(job_id: str) -> str:
    """The headless Service of a distributed job (a DNS-1035 label: starts with a letter)."""
    return dns_label(job_id, prefix="job-")


def visible_devices(placement: Placement, uuids: dict[int, str]) -> str:
    """``NVIDIA_VISIBLE_DEVICES``: GPU UUIDs when the agent published them (stable across reboots,
    like HAMi), else indices."""
    return ",".join(uuids.get(i) or str(i) for i in placement.gpu_indices)


def gpu_environment(placement: Placement, uuids: dict[int, str]) -> dict[str, str]:
    """Container environment that carries the GPU assignment (DESIGN.md §4).

    - whole GPUs: ``NVIDIA_VISIBLE_DEVICES`` lists them;
    - a share (``0 < gpu_milli < 1000`` on one GPU): also
      ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = ceil(gpu_milli / 10)`` (MPS caps the SMs a client uses),
      ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT = "0=<MiB>M"`` (device ordinal 0 *inside* the container) when
      a GPU memory size was asked, and HAMi-core's ``CUDA_DEVICE_SM_LIMIT`` /
      ``CUDA_DEVICE_MEMORY_LIMIT_0`` with the same numbers;
    - no GPU: ``NVIDIA_VISIBLE_DEVICES=void`` so the NVIDIA runtime exposes none.
    """
    if not placement.gpu_indices:
        return {"NVIDIA_VISIBLE_DEVICES": "void"}
    env = {
        "NVIDIA_VISIBLE_DEVICES": visible_devices(placement, uuids),
        "GPU_PLATFORM_GPU_INDICES": ",".join(str(i) for i in placement.gpu_indices),
        "GPU_PLATFORM_GPU_MILLI": str(placement.gpu_milli or GPU_MILLI),
    }
    if 0 < placement.gpu_milli < GPU_MILLI:
        percent = max(1, math.ceil(placement.gpu_milli / 10))
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(percent)
        env["CUDA_DEVICE_SM_LIMIT"] = str(percent)
        if placement.gpu_memory_mib:
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={placement.gpu_memory_mib}M"
            env["CUDA_DEVICE_MEMORY_LIMIT_0"] = f"{placement.gpu_memory_mib}m"
            env["GPU_PLATFORM_GPU_MEMORY_MIB"] = str(placement.gpu_memory_mib)
    return env


def assignment_annotations(placement: Placement, uuids: dict[int, str]) -> dict[str, str]:
    """Pod annotations recording where a task runs; the backend rebuilds its state from them."""

    return {
        ANN_NODE: placement.node,
        ANN_GPU_INDICES: ",".join(str(i) for i in placement.gpu_indices),
        ANN_GPU_UUIDS: ",".join(uuids.get(i, "") for i in placement.gpu_indices),
        ANN_GPU_MILLI: str(placement.gpu_milli),
        ANN_GPU_MEMORY_MIB: str(placement.gpu_memory_mib),
        ANN_VISIBLE_DEVICES: visible_devices(placement, uuids) if placement.gpu_indices else "void",
        ANN_PLACEMENT: json.dumps(placement.to_dict(), sort_keys=True),
    }

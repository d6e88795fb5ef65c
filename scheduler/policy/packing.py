"""Packing ("share when it fits"): which 1-GPU jobs are offered as a share of a GPU, and with what.

Sharing rules (the job's estimated memory footprint ``mem``, the GPU memory ``M``):

- *half* (ours, Gandiva): a 1-GPU job with ``mem + CONTEXT_MIB <= M / 2`` asks for
  ``gpu_milli = 500, gpu_memory_mib = mem + CONTEXT_MIB``: at most two jobs per GPU, each with
  guaranteed memory. Other jobs ask for whole GPUs.
- *memory* (gpushare): a 1-GPU job with ``mem + CONTEXT_MIB < M`` asks only for its memory, its
  compute share proportional to it (``gpu_milli = ceil(1000 * mem' / M)``): as many jobs as memory
  allows, interference-blind.

Admission of a share next to residents is the placement profile's: under ``ours`` the interference
plugin admits a co-location only when the *expected* predicted slowdown of every job on the GPU is
within its ``slowdown_tolerance``, and prefers an idle GPU (packing only under pressure). A refused
job waits with the plugin's reason (``Decision.unschedulable``).

On the platform only jobs with ``allow_sharing`` are offered as shares (``share_request``); in the
simulator every trace job may share (the published rules of Gandiva and gpushare).
"""

from __future__ import annotations

import math
from dataclasses import replace

from scheduler.model import JobRequest

CONTEXT_MIB = 512
SHARED_CPU_MILLI = 1000
SHARED_MEMORY_MIB = 8 * 1024
WHOLE_CPU_MILLI = 4000
WHOLE_MEMORY_MIB = 32 * 1024
HALF_MILLI = 500


def shared_request(share: str, num_gpus: int, mem_mib: int, gpu_memory_mib: int) -> tuple[int, int] | None:
    """(gpu_milli, gpu_memory_mib) of a shared request under ``share``, or None for whole GPUs."""
    if num_gpus != 1 or share == "none":
        return None
    need = mem_mib + CONTEXT_MIB
    if share == "half":
        return (HALF_MILLI, need) if need <= gpu_memory_mib // 2 else None
    if share == "memory":
        if need >= gpu_memory_mib:
            return None
        return min(999, max(1, math.ceil(1000 * need / gpu_memory_mib))), need
    raise ValueError(f"unknown share rule {share!r}")


def job_memory_mib(request: JobRequest) -> int | None:
    """The job's estimated GPU memory footprint (its measured profile), None when unknown."""
    value = request.profile.get("gpu_memory_mib")
    try:
        mem = int(float(value)) if value is not None else 0
    except (TypeError, ValueError):
        return None
    return mem if mem > 0 else None


def share_request(share: str, request: JobRequest, gpu_memory_mib: int) -> JobRequest:
    """``request`` as the policy offers it: a job of one task on one whole GPU that allows sharing
    and whose footprint is known becomes a shared request under ``share``; any other is unchanged.

    ``gpu_memory_mib``: the smallest GPU memory of the cluster (a share must fit any GPU)."""
    if share == "none" or not request.allow_sharing or len(request.tasks) != 1:
        return request
    task = request.tasks[0]
    mem = job_memory_mib(request)
    if task.gpus != 1 or task.gpu_milli or mem is None or gpu_memory_mib <= 0:
        return request
    got = shared_request(share, 1, mem, gpu_memory_mib)
    if got is None:
        return request
    milli, need = got
    shared = replace(task, gpus=0, gpu_milli=milli, gpu_memory_mib=need)
    return replace(request, tasks=[shared])

"""On the local backend the platform profiles solo runs itself, through NVML, when a driver is present.

Kubernetes nodes have the node agent, which posts its samples (``jobs.agent_api``). A machine run by
the local backend has no agent: its GPUs are the platform's own, so beat's ``solo_sample_sweep``
(``jobs.tasks.sample_solo_profiles``, every ``SOLO_SAMPLE_SECONDS``) does the agent's work:

* for every RUNNING task alone on its one GPU (no other task of any job on that GPU) whose image and
  command have no solo profile yet, it reads one NVML sample of that GPU
  (``scheduler.agent.profiling.read_sample``: SM and memory utilisation, the device's used memory,
  which is the job's while it is alone) with the throughput the task reports (the throughput
  contract), at ``t`` = seconds since the task started;
* the samples of one run accumulate in the cache (a restarted run starts over);
* once they span ``SOLO_PROFILE_SECONDS`` past the warm-up (``SOLO_WARMUP_SECONDS``), they become the configuration's
  ``SoloProfile`` (``solo_profile_record``, the same service the agent's endpoint calls).

Without a driver (no ``pynvml``, or NVML does not start) the sweep does nothing and says so once in
the log: virtual GPUs have nothing to sample. Other backends are skipped (their nodes have agents).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache

from jobs.cluster import get_backend
from jobs.models import SoloProfile, Task
from jobs.profiling_services import command_line, job_configuration, solo_profile_record
from scheduler.agent import profiling
from scheduler.backends.base import ClusterBackend, TaskPhase

logger = logging.getLogger(__name__)

_KEY = "solo-samples:{task}:{start}"
_KEEP_S = 3600


def _settings_s(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def solo_sample_sweep(backend: ClusterBackend | None = None, nvml: Any | None = None) -> int:
    """One sampling pass (module docstring); returns the solo profiles recorded by this pass."""
    backend = backend or get_backend()
    if getattr(backend, "name", "") != "local":
        return 0
    running = [
        s
        for s in backend.task_statuses()
        if s.phase is TaskPhase.RUNNING and len(s.gpu_indices) == 1 and s.started_at is not None
    ]
    per_gpu: dict[tuple[str, int], int] = {}
    for s in running:
        per_gpu[(s.node, s.gpu_indices[0])] = per_gpu.get((s.node, s.gpu_indices[0]), 0) + 1
    alone = [s for s in running if per_gpu[(s.node, s.gpu_indices[0])] == 1]
    if not alone:
        return 0
    tasks = {
        t.name: t
        for t in Task.objects.filter(name__in=[s.task_id for s in alone]).select_related("job__image")
    }
    keys = {name: job_configuration(t.job) for name, t in tasks.items()}
    profiled = set(
        SoloProfile.objects.filter(
            image__in={k[0] for k in keys.values()}, command_hash__in={k[1] for k in keys.values()}
        ).values_list("image", "command_hash")
    )
    todo = [s for s in alone if s.task_id in tasks and keys[s.task_id] not in profiled]
    if not todo:
        return 0
    try:
        lib = profiling.open_nvml(nvml)
    except profiling.NoNvidiaDriver as exc:
        logger.debug("solo sampling skipped: %s", exc)
        return 0
    models = {(n.name, g.index): g.model for n in backend.snapshot().nodes for g in n.gpus}
    span = _settings_s("SOLO_PROFILE_SECONDS", 60.0)
    warmup = _settings_s("SOLO_WARMUP_SECONDS", 10.0)
    recorded = 0
    now = time.time()
    try:
        for status in todo:
            task = tasks[status.task_id]
            index = status.gpu_indices[0]
            assert status.started_at is not None
            key = _KEY.format(task=status.task_id, start=int(status.started_at))
            sample = profiling.read_sample(lib, index, now - status.started_at)
            sample.throughput = status.throughput
            samples: list[dict[str, Any]] = [*cache.get(key, []), sample.__dict__]
            if samples[-1]["t"] - max(warmup, samples[0]["t"]) < span:
                cache.set(key, samples, timeout=_KEEP_S)
                continue
            image, _ = keys[status.task_id]
            solo_profile_record(
                image=image,
                command=command_line(task.job.command or [], task.job.args or []),
                gpu_model=models.get((status.node, index), ""),
                samples=samples,
                warmup_s=warmup,
            )
            cache.delete(key)
            recorded += 1
    finally:
        with contextlib.suppress(Exception):
            lib.nvmlShutdown()
    return recorded

"""What this machine offers: CPU, memory and GPUs (real ones through NVML, or virtual ones).

``machine_node(...)`` builds the one :class:`~scheduler.model.Node` of the local backend:

* CPU: the CPUs this process may run on (``os.sched_getaffinity``, else ``os.cpu_count``), in milli;
* memory: ``MemTotal`` of ``/proc/meminfo`` in MiB (a configured value wins on other systems);
* GPUs: when NVML starts (an NVIDIA driver is present), every GPU with its model, memory and UUID, the
  driver and CUDA versions, and the link topology (``scheduler.topology.nvml``); otherwise
  ``virtual_gpus`` virtual GPUs (configured model and memory, UUIDs ``virtual-<i>``) and the node label
  ``gpu-platform.io/virtual=true``, so the API and UI can say the GPUs are not real.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.model import Gpu, Node

log = logging.getLogger(__name__)

LABEL_BACKEND = "gpu-platform.io/backend"
LABEL_VIRTUAL = "gpu-platform.io/virtual"
LABEL_GPU_SOURCE = "gpu-platform.io/gpu-source"
VIRTUAL_UUID_PREFIX = "virtual-"
GPU_MODES = ("auto", "nvml", "virtual")


class NoGpuDriver(RuntimeError):
    """NVML could not start; the message is one line."""


@dataclass
class GpuInventory:
    gpus: list[Gpu] = field(default_factory=list)
    driver_version: str = ""
    cuda_version: str = ""
    topology: Any = None
    virtual: bool = False
    # Why the GPUs are virtual (e.g. "no NVIDIA driver available (...)"), for the node's log/labels.
    note: str = ""


def cpu_milli() -> int:
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    return count * 1000


def memory_mib(meminfo: str | os.PathLike[str] = "/proc/meminfo") -> int:
    """``MemTotal`` in MiB; 0 when the file cannot be read (the caller then needs a configured value)."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024  # the file says kB (KiB)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def virtual_gpus(count: int, model: str, memory: int) -> GpuInventory:
    gpus = [
        Gpu(index=i, model=model, memory_mib=memory, uuid=f"{VIRTUAL_UUID_PREFIX}{i}") for i in range(count)
    ]
    return GpuInventory(gpus=gpus, virtual=True)


def nvml_gpus(nvml: Any) -> GpuInventory:
    """Every GPU NVML reports, with versions and topology. Raises NoGpuDriver when NVML cannot start."""
    from scheduler.agent.inventory import NoNvidiaDriver, read_inventory, start

    try:
        start(nvml)
    except NoNvidiaDriver as exc:
        raise NoGpuDriver(str(exc)) from None
    try:
        reading = read_inventory(nvml, with_topology=False)
        if not reading.gpus:
            raise NoGpuDriver("NVML reports no GPUs")
        topology = None
        try:
            from scheduler.topology.nvml import NvmlTopologyError, read_topology

            topology = read_topology(nvml)
        except (NvmlTopologyError, ValueError, AttributeError) as exc:
            log.warning("local backend: no GPU link topology (%s); links count as unknown", exc)
        gpus = [Gpu(index=g.index, model=g.model, memory_mib=g.memory_mib, uuid=g.uuid) for g in reading.gpus]
        return GpuInventory(
            gpus=gpus,
            driver_version=reading.driver_version,
            cuda_version=reading.cuda_version,
            topology=topology,
        )
    finally:
        with contextlib.suppress(Exception):  # shutting down is best effort
            nvml.nvmlShutdown()


def _import_pynvml() -> Any:
    try:
        import pynvml
    except ImportError as exc:
        raise NoGpuDriver(f"pynvml (nvidia-ml-py) is not installed: {exc}") from None
    return pynvml


def gpu_inventory(
    *,
    mode: str = "auto",
    virtual_count: int = 1,
    virtual_model: str = "Virtual GPU",
    virtual_memory_mib: int = 16384,
    nvml: Any = None,
) -> GpuInventory:
    """GPUs per ``mode``: ``nvml`` (real GPUs or NoGpuDriver), ``virtual``, or ``auto`` (real GPUs
    when NVML starts, else virtual ones)."""
    if mode not in GPU_MODES:
        raise ValueError(f"unknown GPU mode {mode!r}; use one of {', '.join(GPU_MODES)}")
    if mode == "virtual":
        inventory = virtual_gpus(virtual_count, virtual_model, virtual_memory_mib)
        inventory.note = "virtual GPUs by configuration"
        return inventory
    try:
        return nvml_gpus(nvml if nvml is not None else _import_pynvml())
    except NoGpuDriver as exc:
        if mode == "nvml":
            raise
        inventory = virtual_gpus(virtual_count, virtual_model, virtual_memory_mib)
        inventory.note = str(exc)
        return inventory


def machine_node(
    name: str,
    gpus: GpuInventory,
    *,
    cpu: int | None = None,
    memory: int | None = None,
) -> Node:
    """The node of this machine (without usage); ``cpu``/``memory`` override what was detected."""
    labels = {
        LABEL_BACKEND: "local",
        LABEL_VIRTUAL: "true" if gpus.virtual else "false",
        LABEL_GPU_SOURCE: "virtual" if gpus.virtual else "nvml",
    }
    return Node(
        name=name,
        cpu_milli=cpu if cpu else cpu_milli(),
        memory_mib=memory if memory else memory_mib(),
        gpus=[Gpu(index=g.index, model=g.model, memory_mib=g.memory_mib, uuid=g.uuid) for g in gpus.gpus],
        labels=labels,
        driver_version=gpus.driver_version,
        cuda_version=gpus.cuda_version,
        topology=gpus.topology,
    )

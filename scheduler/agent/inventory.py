"""What NVML says about this node's GPUs: identity, memory, versions, utilisation and link topology.

Every function takes ``nvml``, a pynvml-like module (``import pynvml`` in production, a recorded fake
in tests), already initialised with ``nvmlInit()``.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

MIB = 1024 * 1024

log = logging.getLogger(__name__)


class NoNvidiaDriver(Exception):
    """NVML cannot start: no driver, no library, or no GPU. The message is one line for the operator."""


@dataclass
class GpuReading:
    index: int
    uuid: str
    model: str
    memory_mib: int
    memory_used_mib: int
    utilization_pct: int
    memory_utilization_pct: int
    pci_bus_id: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class NodeInventory:
    driver_version: str
    cuda_version: str
    gpus: list[GpuReading] = field(default_factory=list)
    # ``scheduler.topology.Topology.to_dict()`` form: links as printed by ``nvidia-smi topo -m``.
    topology: dict[str, Any] | None = None

    @property
    def model(self) -> str:
        return self.gpus[0].model if self.gpus else ""


def _text(value: Any) -> str:
    """Old pynvml returned bytes, new returns str."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _bus_id(value: Any) -> str:
    """Normalise a PCI bus id: NVML writes an 8-digit domain in one call and 4 in another."""
    text = _text(value).strip().lower()
    if text.count(":") == 2:
        domain, rest = text.split(":", 1)
        try:
            return f"{int(domain, 16):04x}:{rest}"
        except ValueError:
            return text
    return text


def cuda_version(driver_cuda: int) -> str:
    """``nvmlSystemGetCudaDriverVersion`` encodes 12.2 as 12020."""
    return f"{driver_cuda // 1000}.{(driver_cuda % 1000) // 10}" if driver_cuda > 0 else ""


def start(nvml: Any) -> None:
    """``nvmlInit`` with the failure as one line (NoNvidiaDriver)."""
    try:
        nvml.nvmlInit()
    except Exception as exc:  # pynvml raises NVMLError subclasses, or OSError when the library is absent
        raise NoNvidiaDriver(f"no NVIDIA driver available (NVML: {str(exc) or type(exc).__name__})") from None


def read_topology(nvml: Any) -> dict[str, Any] | None:
    """The node's link matrix in ``Topology.to_dict()`` form (NVLink counts per pair, NVSwitch, the
    PCIe class behind every pair), read by ``scheduler.topology.nvml``; None, with a warning in the
    log, when NVML cannot tell (the scheduler then treats links as unknown)."""
    from scheduler.topology.nvml import NvmlTopologyError
    from scheduler.topology.nvml import read_topology as read_nvml_topology

    try:
        return read_nvml_topology(nvml).to_dict()
    except (NvmlTopologyError, ValueError) as exc:
        log.warning("no link topology: %s", exc)
        return None


def read_inventory(nvml: Any, *, with_topology: bool = True) -> NodeInventory:
    """One reading of every GPU of the node (after ``start(nvml)``)."""
    driver = _text(nvml.nvmlSystemGetDriverVersion())
    try:
        cuda = cuda_version(int(nvml.nvmlSystemGetCudaDriverVersion()))
    except Exception:
        cuda = ""
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(nvml.nvmlDeviceGetCount()))]
    gpus = []
    for index, handle in enumerate(handles):
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        try:
            rates = nvml.nvmlDeviceGetUtilizationRates(handle)
            util, mem_util = int(rates.gpu), int(rates.memory)
        except Exception:
            util = mem_util = 0  # not supported on some boards (e.g. MIG mode); not a reason to stop
        gpus.append(
            GpuReading(
                index=index,
                uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                model=_text(nvml.nvmlDeviceGetName(handle)),
                memory_mib=int(memory.total) // MIB,
                memory_used_mib=int(memory.used) // MIB,
                utilization_pct=util,
                memory_utilization_pct=mem_util,
                pci_bus_id=_bus_id(nvml.nvmlDeviceGetPciInfo(handle).busId),
            )
        )
    inventory = NodeInventory(driver_version=driver, cuda_version=cuda, gpus=gpus)
    if with_topology and gpus:
        inventory.topology = read_topology(nvml)
    return inventory

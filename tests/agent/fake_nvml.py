"""A pynvml-like module that answers from recorded NVML readings (tests/agent/data/*.json).

Only the calls the agent makes exist; everything else raises AttributeError, so an agent that starts
depending on another NVML call fails here first. Errors mimic pynvml: NVMLError subclasses.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

DATA = Path(__file__).parent / "data"


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's name
    pass


class NVMLError_InvalidArgument(NVMLError):  # noqa: N801 - pynvml's name
    pass


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801 - pynvml's name
    def __str__(self) -> str:
        return "NVML Shared Library Not Found"


class FakeNvml:
    """Serves one recorded machine; ``shutdowns`` counts nvmlShutdown calls for assertions."""

    NVMLError = NVMLError  # pynvml exposes its error base class on the module

    def __init__(self, recording: dict[str, Any], *, driver_loaded: bool = True) -> None:
        self.recording = recording
        self.driver_loaded = driver_loaded
        self.initialised = False
        self.shutdowns = 0

    @classmethod
    def load(cls, name: str, **kwargs: Any) -> FakeNvml:
        return cls(json.loads((DATA / name).read_text()), **kwargs)

    def _device(self, handle: Any) -> dict[str, Any]:
        if not self.initialised:
            raise NVMLError("Uninitialized")
        return self.recording["devices"][handle]

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names from here on
        if not self.driver_loaded:
            raise NVMLError_LibraryNotFound()
        self.initialised = True

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.initialised = False
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return self.recording["driver_version"]

    def nvmlSystemGetCudaDriverVersion(self) -> int:  # noqa: N802
        return self.recording["cuda_driver_version"]

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.recording["devices"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        self._device(index)
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> str:  # noqa: N802
        return self._device(handle)["uuid"]

    def nvmlDeviceGetName(self, handle: int) -> bytes:  # noqa: N802
        return self._device(handle)["name"].encode()  # older pynvml returned bytes

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:  # noqa: N802
        d = self._device(handle)
        return SimpleNamespace(
            total=d["memory_total"], used=d["memory_used"], free=d["memory_total"] - d["memory_used"]
        )

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:  # noqa: N802
        d = self._device(handle)
        if d.get("util_gpu") is None:
            raise NVMLError_NotSupported("Not Supported")
        return SimpleNamespace(gpu=d["util_gpu"], memory=d["util_mem"])

    def nvmlDeviceGetPciInfo(self, handle: int) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(busId=self._device(handle)["bus_id"])

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:  # noqa: N802
        return self.recording["ancestors"][a][b]

    def _link(self, handle: int, link: int) -> dict[str, Any]:
        links = self._device(handle).get("nvlinks")
        if not links:
            raise NVMLError_NotSupported("Not Supported")
        if link >= len(links):
            raise NVMLError_InvalidArgument("Invalid Argument")
        return links[link]

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:  # noqa: N802
        return self._link(handle, link)["state"]

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: int, link: int) -> int:  # noqa: N802
        return self._link(handle, link)["remote_type"]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: int, link: int) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(busId=self._link(handle, link)["remote_bus"])


def pcie_only(classes: list[list[str]], model: str = "NVIDIA L40S") -> dict[str, Any]:
    """A recording of a PCIe-only machine from its matrix of PCIe classes (no NVLink support)."""
    level = {"X": 0, "PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50}
    n = len(classes)
    return {
        "driver_version": "550.90.07",
        "cuda_driver_version": 12040,
        "devices": [
            {
                "uuid": f"GPU-pcie-{i}",
                "name": model,
                "memory_total": 48 * 1024**3,
                "memory_used": 0,
                "util_gpu": None,
                "util_mem": None,
                "bus_id": f"00000000:{16 * (i + 1):02X}:00.0",
                "nvlinks": [],
            }
            for i in range(n)
        ],
        "ancestors": [[level[c] for c in row] for row in classes],
    }

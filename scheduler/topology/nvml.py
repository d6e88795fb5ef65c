"""Read a node's ``Topology`` from NVML through a pynvml-like module passed in.

The node agent calls ``read_topology(pynvml)``; tests pass a module-like object with recorded
readings. Calls used (all in nvidia-ml-py): ``nvmlDeviceGetCount``, ``nvmlDeviceGetHandleByIndex``,
``nvmlDeviceGetName``, ``nvmlDeviceGetPciInfo``, ``nvmlDeviceGetTopologyCommonAncestor``,
``nvmlDeviceGetNvLinkState``, ``nvmlDeviceGetNvLinkRemotePciInfo`` and, when present,
``nvmlDeviceGetNvLinkRemoteDeviceType``, ``nvmlDeviceGetCpuAffinity``, ``nvmlDeviceGetNumaNodeId``.

NVLink counts follow nvidia-smi: a link whose remote end is another GPU counts for that pair; a link
to an NVSwitch counts for the GPU, and every pair of switch-attached GPUs gets
``min(switch links of i, switch links of j)`` (the HAMi fix of go-gpuallocator's NVSwitch blind
spot). The PCIe class of every pair (hidden behind ``NV#`` in ``topo -m``) is kept in ``pcie``.
"""

from __future__ import annotations

from typing import Any

from scheduler.topology.graph import Topology

# NVML common-ancestor levels -> matrix classes (INTERNAL = same board, closest PCIe class).
_LEVELS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
_SWITCH = 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH
_MAX_LINKS = 18


class NvmlTopologyError(RuntimeError):
    """NVML did not give a usable topology (one line for the agent's log)."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _bus_id(value: Any) -> str:
    """Normalise ``0000:07:00.0`` / ``00000000:07:00.0`` to one spelling."""
    text = _text(value).strip().lower()
    domain, _, rest = text.partition(":")
    try:
        return f"{int(domain, 16):08x}:{rest}"
    except ValueError:
        return text


def _ranges(cpus: list[int]) -> str:
    out: list[str] = []
    start = prev = None
    for c in cpus:
        if prev is not None and c == prev + 1:
            prev = c
            continue
        if start is not None:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = c
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(out)


def read_topology(nvml: Any, *, init: bool = False, nic_gbit: float = 100.0) -> Topology:
    """Build the node's ``Topology`` from NVML; ``init`` calls ``nvmlInit``/``nvmlShutdown`` around it."""
    error = getattr(nvml, "NVMLError", Exception)
    if init:
        nvml.nvmlInit()
    try:
        return _read(nvml, error, nic_gbit)
    except error as exc:
        raise NvmlTopologyError(f"NVML topology query failed: {exc}") from None
    finally:
        if init:
            nvml.nvmlShutdown()


def _read(nvml: Any, error: type[BaseException], nic_gbit: float) -> Topology:
    n = int(nvml.nvmlDeviceGetCount())
    if n == 0:
        raise NvmlTopologyError("NVML reports no GPUs")
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
    bus = [_bus_id(nvml.nvmlDeviceGetPciInfo(h).busId) for h in handles]
    index_of = {b: i for i, b in enumerate(bus)}
    model = _text(nvml.nvmlDeviceGetName(handles[0]))
    max_links = int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", _MAX_LINKS))
    direct = [[0] * n for _ in range(n)]
    switch_links = [0] * n
    for i, h in enumerate(handles):
        for link in range(max_links):
            try:
                if not nvml.nvmlDeviceGetNvLinkState(h, link):
                    continue
                remote = _bus_id(nvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId)
                kind = (
                    nvml.nvmlDeviceGetNvLinkRemoteDeviceType(h, link)
                    if hasattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType")
                    else None
                )
            except error:
                continue  # link not supported / disabled, as go-gpuallocator skips it
            if kind == _SWITCH:
                switch_links[i] += 1
            elif remote in index_of and index_of[remote] != i:
                direct[i][index_of[remote]] += 1
            # else: a link to a CPU (POWER9 NPU) or an unknown device: not a GPU pair link
    pcie = [["X" if i == j else "" for j in range(n)] for i in range(n)]
    classes = [["X" if i == j else "" for j in range(n)] for i in range(n)]
    counts = [[0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            level = int(nvml.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j]))
            cls = _LEVELS.get(level, "SYS")
            links = (
                min(direct[i][j], direct[j][i])
                if direct[i][j] and direct[j][i]
                else max(direct[i][j], direct[j][i])
            )
            if switch_links[i] and switch_links[j]:
                links += min(switch_links[i], switch_links[j])
            for a, b in ((i, j), (j, i)):
                pcie[a][b] = cls
                classes[a][b] = "NV" if links else cls
                counts[a][b] = links
    affinity: list[str] = []
    numa: list[str] = []
    for h in handles:
        try:
            words = nvml.nvmlDeviceGetCpuAffinity(h, 64)
            cpus = [w * 64 + b for w, word in enumerate(words) for b in range(64) if int(word) >> b & 1]
            affinity.append(_ranges(cpus))
        except (error, AttributeError):
            affinity.append("")
        try:
            numa.append(str(int(nvml.nvmlDeviceGetNumaNodeId(h))))
        except (error, AttributeError):
            numa.append("")
    uses_switch = any(switch_links)
    return Topology(
        classes=tuple(tuple(r) for r in classes),
        nvlinks=tuple(tuple(r) for r in counts),
        cpu_affinity=tuple(affinity) if any(affinity) else (),
        numa=tuple(numa) if any(numa) else (),
        pcie=tuple(tuple(r) for r in pcie),
        gpu_model=model,
        nvswitch=True if uses_switch else None,
        nic_gbit=nic_gbit,
        source="nvml",
    )

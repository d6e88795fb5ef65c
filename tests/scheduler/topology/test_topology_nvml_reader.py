"""Reading the topology from NVML through a pynvml-like module with recorded readings."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from scheduler.topology.cost import ring_bandwidth
from scheduler.topology.nvml import NvmlTopologyError, read_topology


class FakeNVMLError(Exception):
    pass


@dataclass
class FakeNvml:
    """Recorded NVML answers: bus ids, common-ancestor levels, NVLink ports (remote bus, type)."""

    names: list[str]
    bus: list[str]
    levels: dict[tuple[int, int], int]
    links: dict[int, list[tuple[str, int] | None]]
    numa: list[int]
    inits: int = 0

    NVMLError = FakeNVMLError
    NVML_NVLINK_MAX_LINKS = 18

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.inits -= 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.bus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return self.names[h].encode()

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=self.bus[h].encode())

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        return self.levels[(min(a, b), max(a, b))]

    def _port(self, h: int, link: int) -> tuple[str, int]:
        ports = self.links.get(h, [])
        if link >= len(ports) or ports[link] is None:
            raise FakeNVMLError("Not Supported")
        port = ports[link]
        assert port is not None
        return port

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        self._port(h, link)
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> Any:
        return SimpleNamespace(busId=self._port(h, link)[0])

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: int, link: int) -> int:
        return self._port(h, link)[1]

    def nvmlDeviceGetCpuAffinity(self, h: int, size: int) -> list[int]:
        return [0xFF if self.numa[h] == 0 else 0xFF00]

    def nvmlDeviceGetNumaNodeId(self, h: int) -> int:
        return self.numa[h]


def _bridged_pairs() -> FakeNvml:
    """4 GPUs: NVLink bridges 0-1 and 2-3 (2 links each), PHB inside a socket, SYS across."""
    bus = [f"00000000:{b:02X}:00.0" for b in (0x1A, 0x1B, 0x8A, 0x8B)]
    # Remote bus ids as NVML prints them for peers: 4-digit domain (normalised by the reader).
    peer = [b[4:] for b in bus]
    links: dict[int, list[tuple[str, int] | None]] = {
        0: [(peer[1], 0), (peer[1], 0), None],
        1: [(peer[0], 0), (peer[0], 0)],
        2: [(peer[3], 0), (peer[3], 0)],
        3: [(peer[2], 0), None, (peer[2], 0)],
    }
    levels = {(0, 1): 30, (2, 3): 30, (0, 2): 50, (0, 3): 50, (1, 2): 50, (1, 3): 50}
    return FakeNvml(["NVIDIA RTX A6000"] * 4, bus, levels, links, [0, 0, 1, 1])


def test_it_counts_nvlinks_per_pair_and_keeps_the_hidden_pcie_class() -> None:
    topo = read_topology(_bridged_pairs())
    assert topo.gpu_count == 4
    assert topo.link(0, 1) == "NV2" and topo.link(2, 3) == "NV2"
    assert topo.link(1, 2) == "SYS"
    assert topo.pcie_class(0, 1) == "PHB"
    assert topo.numa == ("0", "0", "1", "1")
    assert topo.cpu_affinity == ("0-7", "0-7", "8-15", "8-15")
    assert topo.generation.name == "ampere-bridge"
    assert not topo.is_nvswitch
    assert ring_bandwidth(topo, [0, 1]) == pytest.approx(2 * 14.06 * 0.8)


def test_nvswitch_links_give_every_pair_the_per_gpu_link_count() -> None:
    n = 8
    bus = [f"00000000:{0x10 + i:02X}:00.0" for i in range(n)]
    switch = [(f"0000:{0xC0 + k:02X}:00.0", 2) for k in range(4)]
    links: dict[int, list[tuple[str, int] | None]] = {i: [switch[k % 4] for k in range(18)] for i in range(n)}
    levels = {(i, j): 40 if (i < 4) == (j < 4) else 50 for i in range(n) for j in range(i + 1, n)}
    fake = FakeNvml(["NVIDIA H100 80GB HBM3"] * n, bus, levels, links, [0] * 4 + [1] * 4)
    topo = read_topology(fake, init=True)
    assert fake.inits == 0  # init and shutdown were paired
    assert topo.is_nvswitch
    assert {topo.link(i, j) for i in range(n) for j in range(n) if i != j} == {"NV18"}
    assert topo.pcie_class(0, 5) == "SYS"
    assert ring_bandwidth(topo, [0, 5]) == pytest.approx(18 * 25 * 0.82)


def test_it_round_trips_through_the_dict_form() -> None:
    from scheduler.topology.graph import Topology

    topo = read_topology(_bridged_pairs())
    assert Topology.from_dict(topo.to_dict()) == topo


def test_an_nvml_failure_is_one_clear_error() -> None:
    class Broken(FakeNvml):
        def nvmlDeviceGetCount(self) -> int:
            raise FakeNVMLError("Driver Not Loaded")

    fake = Broken([], [], {}, {}, [])
    with pytest.raises(NvmlTopologyError, match="NVML topology query failed: Driver Not Loaded"):
        read_topology(fake)

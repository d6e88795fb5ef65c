"""Shared helpers of the topology tests (not a test module)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.datapaths import default_data_dir
from scheduler.topology.graph import Topology
from scheduler.topology.parser import read_topology_file

TOPOLOGY_DIR = default_data_dir() / "topologies"

needs_data = pytest.mark.skipif(
    not TOPOLOGY_DIR.is_dir(), reason=f"shared topology matrices not found at {TOPOLOGY_DIR}"
)


def matrix_files() -> list[Path]:
    return sorted(TOPOLOGY_DIR.glob("*.txt")) if TOPOLOGY_DIR.is_dir() else []


def load(name: str) -> Topology:
    path = TOPOLOGY_DIR / f"{name}.txt"
    if not path.exists():
        pytest.skip(f"shared topology matrix {path} not found")
    return read_topology_file(str(path), gpu_model=name)


def dgx1_volta_test_node() -> Topology:
    """go-gpuallocator's DGX-1 Volta test data (NVLinks + PCIe hierarchy, reference section 1.5)."""
    nv = {
        (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2, (2, 3): 2,
        (2, 6): 1, (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2,
    }  # fmt: skip
    n = 8
    pcie = [["X" if i == j else "" for j in range(n)] for i in range(n)]
    for i in range(n):
        for j in range(n):
            if i != j:
                same_socket = (i < 4) == (j < 4)
                pcie[i][j] = ("PIX" if i // 2 == j // 2 else "PHB") if same_socket else "SYS"
    classes = [row[:] for row in pcie]
    counts = [[0] * n for _ in range(n)]
    for (a, b), k in nv.items():
        for i, j in ((a, b), (b, a)):
            classes[i][j] = "NV"
            counts[i][j] = k
    return Topology(
        classes=tuple(map(tuple, classes)),
        nvlinks=tuple(map(tuple, counts)),
        pcie=tuple(map(tuple, pcie)),
        gpu_model="Tesla V100-SXM2-16GB",
    )


def nv_pairs_node(n: int, pairs: list[tuple[int, int, int]], default: str = "SYS") -> Topology:
    """A node where listed pairs have ``k`` NVLinks and every other pair has class ``default``."""
    classes = [["X" if i == j else default for j in range(n)] for i in range(n)]
    counts = [[0] * n for _ in range(n)]
    for a, b, k in pairs:
        for i, j in ((a, b), (b, a)):
            classes[i][j] = "NV"
            counts[i][j] = k
    return Topology(classes=tuple(map(tuple, classes)), nvlinks=tuple(map(tuple, counts)))

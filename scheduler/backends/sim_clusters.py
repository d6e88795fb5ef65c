"""Cluster specs for the simulated backend: which nodes exist, with which GPUs and links.

A spec is plain data (JSON-able) so the simulated backend can store it in its state file. The demo
cluster is 4 DGX-1-like nodes (8 x V100 32 GB in an NVLink hybrid cube-mesh) plus 4 small nodes with
2 x T4 16 GB on PCIe. The link matrices are ``nvidia-smi topo -m`` text; when ``scheduler.topology``
is importable they are parsed into ``Node.topology`` (see ``parse_topology``).
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from typing import Any

# `nvidia-smi topo -m` of a DGX-1 with V100s: NV1/NV2 bonded NVLinks in a hybrid cube-mesh, the two
# quads joined by NVLink pairs (0-4, 1-5, 2-6, 3-7) and by the inter-socket link (SYS).
DGX1_V100_TOPO = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity
GPU0\t X \tNV1\tNV1\tNV2\tNV2\tSYS\tSYS\tSYS\t0-19,40-59
GPU1\tNV1\t X \tNV2\tNV1\tSYS\tNV2\tSYS\tSYS\t0-19,40-59
GPU2\tNV1\tNV2\t X \tNV2\tSYS\tSYS\tNV1\tSYS\t0-19,40-59
GPU3\tNV2\tNV1\tNV2\t X \tSYS\tSYS\tSYS\tNV1\t0-19,40-59
GPU4\tNV2\tSYS\tSYS\tSYS\t X \tNV1\tNV1\tNV2\t20-39,60-79
GPU5\tSYS\tNV2\tSYS\tSYS\tNV1\t X \tNV2\tNV1\t20-39,60-79
GPU6\tSYS\tSYS\tNV1\tSYS\tNV1\tNV2\t X \tNV2\t20-39,60-79
GPU7\tSYS\tSYS\tSYS\tNV1\tNV2\tNV1\tNV2\t X \t20-39,60-79

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe switches (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing a single PCIe switch
  NV#  = Connection traversing a bonded set of # NVLinks
"""

# Two T4s behind one host bridge (no NVLink), as on a typical 2-GPU inference server.
T4X2_TOPO = """\
\tGPU0\tGPU1\tCPU Affinity
GPU0\t X \tPHB\t0-31
GPU1\tPHB\t X \t0-31
"""

TOPOLOGIES: dict[str, str] = {"dgx1-v100": DGX1_V100_TOPO, "t4x2-pcie": T4X2_TOPO}


def _node(
    name: str, *, cpu_cores: int, memory_gib: int, gpus: int, model: str, gpu_gib: int, topology: str | None
) -> dict[str, Any]:
    return {
        "name": name,
        "cpu_milli": cpu_cores * 1000,
        "memory_mib": memory_gib * 1024,
        "gpu_model": model,
        "gpu_count": gpus,
        "gpu_memory_mib": gpu_gib * 1024,
        "labels": {"gpu.model": model, "simulated": "true"},
        "driver_version": "560.35.03",  # CUDA 12.6: runs every catalog image (CUDA <= 12.6)
        "cuda_version": "12.6",
        "topology": topology,
    }


def demo_cluster() -> list[dict[str, Any]]:
    """4 x (8 x V100-SXM2-32GB, NVLink hybrid cube-mesh) + 4 x (2 x T4 16 GB, PCIe)."""
    nodes = [
        _node(
            f"dgx-{i}",
            cpu_cores=80,
            memory_gib=512,
            gpus=8,
            model="V100-SXM2-32GB",
            gpu_gib=32,
            topology="dgx1-v100",
        )
        for i in range(1, 5)
    ]
    nodes += [
        _node(f"t4-{i}", cpu_cores=32, memory_gib=128, gpus=2, model="T4", gpu_gib=16, topology="t4x2-pcie")
        for i in range(1, 5)
    ]
    return nodes


def small_cluster() -> list[dict[str, Any]]:
    """One 2 x T4 node: small enough that tests can fill it."""
    return [_node("t4-1", cpu_cores=32, memory_gib=128, gpus=2, model="T4", gpu_gib=16, topology="t4x2-pcie")]


CLUSTERS = {"demo": demo_cluster, "small": small_cluster}


def simulator_cluster(name: str, data_dir: Path | None = None) -> list[dict[str, Any]]:
    """The nodes of one of the simulator's YAML cluster specs (``scheduler/sim/clusters/<name>.yaml``,
    or a path to a spec file), as the simulator builds them: the same node names (``g<group>-n<k>``),
    order, sizes and labels, so a replay through the platform offers ``schedule()`` the cluster the
    simulator offers it. Each node also carries its GPU link classes (``links``: the simulator's
    performance ground truth for multi-GPU jobs) and its topology file (``Node.topology``).

    ``data_dir`` holds ``topologies/`` (default: ``scheduler.datapaths.default_data_dir()``).
    Raises ValueError (``scheduler.sim.cluster.ClusterSpecError``) when the spec or a topology file is
    missing or malformed.
    """
    from scheduler.datapaths import default_data_dir
    from scheduler.sim.cluster import load_cluster_spec

    data = data_dir or default_data_dir()
    spec = load_cluster_spec(name, data)
    nodes: list[dict[str, Any]] = []
    for gi, group in enumerate(spec.groups):
        topology_file = ""
        if group.topology:
            path = Path(group.topology)
            topology_file = str(path if path.is_absolute() else data / "topologies" / path)
        links = [[a, b, cls] for (a, b), cls in sorted(group.links.items())]
        for k in range(group.count):
            nodes.append(
                {
                    "name": f"g{gi}-n{k:04d}",
                    "cpu_milli": group.cpu_cores * 1000,
                    "memory_mib": group.memory_gib * 1024,
                    "gpu_model": group.gpu_model,
                    "gpu_count": group.gpus,
                    "gpu_memory_mib": group.gpu_memory_mib,
                    # The simulator's labels (plugins may read them), not the demo cluster's.
                    "labels": {"gpu_model": group.gpu_model},
                    "driver_version": "",
                    "cuda_version": "",
                    "topology": None,
                    "topology_file": topology_file,
                    "links": links,
                    "group": gi,
                }
            )
    return nodes


def simulator_cluster_names() -> list[str]:
    from scheduler.sim.cluster import SPEC_DIR

    return sorted(p.stem for p in SPEC_DIR.glob("*.yaml"))


def cluster_spec(name: str, data_dir: Path | None = None) -> list[dict[str, Any]]:
    """The node definitions of a named cluster: ``demo``, ``small``, or a simulator cluster spec
    (``philly-256``, ...; see :func:`simulator_cluster`). ValueError names the known ones."""
    if name in CLUSTERS:
        return CLUSTERS[name]()
    if name in simulator_cluster_names() or Path(name).is_file():
        return simulator_cluster(name, data_dir)
    raise ValueError(
        f"unknown simulated cluster {name!r}; known: {', '.join(sorted(CLUSTERS))}, or a simulator "
        f"cluster spec: {', '.join(simulator_cluster_names())}"
    )


def node_links(spec: dict[str, Any]) -> dict[tuple[int, int], str]:
    """GPU link classes of a node spec ((a, b) with a < b -> NV, PIX, PXB, PHB, NODE or SYS)."""
    raw = spec.get("links")
    if raw is not None:
        return {(int(a), int(b)): str(cls) for a, b, cls in raw}
    key = spec.get("topology")
    if key in TOPOLOGIES:
        from scheduler.sim.cluster import parse_topology_matrix

        return parse_topology_matrix(TOPOLOGIES[key])
    return {}


@functools.lru_cache(maxsize=32)
def topology_from_file(path: str, gpu_model: str = "") -> Any:
    """``Node.topology`` parsed from an ``nvidia-smi topo -m`` file the way the simulator parses it
    (one object per file, shared by every node that has it); None when unreadable or rejected."""
    from scheduler.sim.cluster import _topology_object

    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return None
    return _topology_object(text, gpu_model)


@functools.lru_cache(maxsize=32)
def parse_topology(key: str | None, *, gpu_model: str = "") -> Any:
    """``Node.topology`` for a topology key: the parsed matrix when scheduler.topology can parse it.

    The topology package is written separately; until it exists (or if its parser rejects the text)
    the node's topology is None, which every plugin treats as "links unknown".
    """
    if not key or key not in TOPOLOGIES:
        return None
    try:
        parser_module = importlib.import_module("scheduler.topology.parser")
    except ImportError:
        return None
    parser = getattr(parser_module, "parse_topology", None)
    if not callable(parser):
        return None
    try:
        return parser(TOPOLOGIES[key], gpu_model=gpu_model, source=f"simulated:{key}")
    except Exception:  # noqa: BLE001  (a parser bug must not take the simulated cluster down)
        return None

"""Cluster spec files for the simulator: node groups, GPU models, topology matrices.

A spec is YAML::

    name: philly-512
    gavel_gpu_type: p100          # which Gavel measurements are the ground truth (k80, p100, v100)
    node_groups:
      - count: 64
        gpus: 8
        gpu_model: P100
        gpu_memory_mib: 16384
        cpu_cores: 48              # optional, default 8 per GPU
        memory_gib: 512            # optional, default 64 per GPU
        topology: pcie_8gpu_pix_pairs_2socket.txt   # file in <data>/topologies; optional

Shipped specs live in ``scheduler/sim/clusters/``; ``--cluster NAME`` finds them by stem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scheduler.model import Gpu, Node

SPEC_DIR = Path(__file__).resolve().parent / "clusters"


class ClusterSpecError(ValueError):
    """The cluster spec is missing or malformed."""


@dataclass
class NodeGroup:
    count: int
    gpus: int
    gpu_model: str
    gpu_memory_mib: int
    cpu_cores: int
    memory_gib: int
    topology: str | None = None
    # (a, b) with a < b -> link class (NV, PIX, PXB, PHB, NODE, SYS).
    links: dict[tuple[int, int], str] = field(default_factory=dict)
    # The matrix as a ``scheduler.topology`` object for the topology-aware plugin (shared by the nodes).
    topology_object: Any = None


@dataclass
class ClusterSpec:
    name: str
    gavel_gpu_type: str
    groups: list[NodeGroup]

    @property
    def total_gpus(self) -> int:
        return sum(g.count * g.gpus for g in self.groups)

    def build_nodes(self) -> tuple[list[Node], list[dict[tuple[int, int], str]]]:
        """Fresh nodes (nothing allocated) and, per node, its GPU link classes."""
        nodes: list[Node] = []
        links: list[dict[tuple[int, int], str]] = []
        for gi, group in enumerate(self.groups):
            for k in range(group.count):
                gpus = [
                    Gpu(index=i, model=group.gpu_model, memory_mib=group.gpu_memory_mib)
                    for i in range(group.gpus)
                ]
                nodes.append(
                    Node(
                        name=f"g{gi}-n{k:04d}",
                        cpu_milli=group.cpu_cores * 1000,
                        memory_mib=group.memory_gib * 1024,
                        gpus=gpus,
                        labels={"gpu_model": group.gpu_model},
                        topology=group.topology_object,
                    )
                )
                links.append(group.links)
        return nodes, links


def parse_topology_matrix(text: str) -> dict[tuple[int, int], str]:
    """Parse ``nvidia-smi topo -m`` GPU rows into link classes (NV# -> NV, SOC -> SYS)."""
    lines = text.splitlines()
    header: list[str] | None = None
    links: dict[tuple[int, int], str] = {}
    for line in lines:
        tokens = line.split()
        if header is None:
            if tokens and tokens[0].startswith("GPU0"):
                header = [t for t in tokens if t.startswith("GPU") and t[3:].isdigit()]
            continue
        if not tokens or not (tokens[0].startswith("GPU") and tokens[0][3:].isdigit()):
            continue
        a = int(tokens[0][3:])
        for b, cell in enumerate(tokens[1 : 1 + len(header)]):
            if a >= b:
                continue
            cls = "NV" if cell.startswith("NV") else ("SYS" if cell == "SOC" else cell)
            links[(a, b)] = cls
    if header is None:
        raise ClusterSpecError("topology matrix has no GPU0.. header row")
    return links


def _topology_object(text: str, gpu_model: str) -> Any:
    """``scheduler.topology``'s parse of the matrix, or None when that parser rejects it."""
    try:
        from scheduler.topology import parse_topology
    except ImportError:
        return None
    try:
        return parse_topology(text, gpu_model=gpu_model)
    except ValueError:
        return None


def _int(raw: dict[str, Any], key: str, default: int | None, where: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ClusterSpecError(f"{where}: {key} must be a positive integer, got {value!r}")
    return value


def load_cluster_spec(path_or_name: str | Path, data_dir: Path | None = None) -> ClusterSpec:
    """Load a spec file, or a shipped spec by name (``philly-512``)."""
    path = Path(path_or_name)
    if not path.is_file():
        shipped = SPEC_DIR / f"{path_or_name}.yaml"
        if not shipped.is_file():
            known = ", ".join(sorted(p.stem for p in SPEC_DIR.glob("*.yaml")))
            raise ClusterSpecError(f"cluster spec {path_or_name!r} not found (shipped specs: {known})")
        path = shipped
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ClusterSpecError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("node_groups"), list) or not raw["node_groups"]:
        raise ClusterSpecError(f"{path}: expected a mapping with a non-empty node_groups list")
    gpu_type = str(raw.get("gavel_gpu_type", "v100"))
    if gpu_type not in ("k80", "p100", "v100"):
        raise ClusterSpecError(f"{path}: gavel_gpu_type must be k80, p100 or v100, got {gpu_type!r}")
    topo_dir = (data_dir / "topologies") if data_dir else None
    groups: list[NodeGroup] = []
    for i, g in enumerate(raw["node_groups"]):
        where = f"{path}: node_groups[{i}]"
        if not isinstance(g, dict):
            raise ClusterSpecError(f"{where}: expected a mapping")
        gpus = _int(g, "gpus", None, where)
        group = NodeGroup(
            count=_int(g, "count", None, where),
            gpus=gpus,
            gpu_model=str(g.get("gpu_model", "GPU")),
            gpu_memory_mib=_int(g, "gpu_memory_mib", None, where),
            cpu_cores=_int(g, "cpu_cores", 8 * gpus, where),
            memory_gib=_int(g, "memory_gib", 64 * gpus, where),
            topology=g.get("topology"),
        )
        if group.topology:
            topo = Path(group.topology)
            if not topo.is_absolute() and topo_dir is not None:
                topo = topo_dir / topo
            if not topo.is_file():
                raise ClusterSpecError(f"{where}: topology file not found: {topo}")
            text = topo.read_text(errors="replace")
            group.links = parse_topology_matrix(text)
            group.topology_object = _topology_object(text, group.gpu_model)
            bad = [k for k in group.links if k[1] >= gpus]
            if bad:
                raise ClusterSpecError(f"{where}: topology has more GPUs than gpus={gpus}")
        groups.append(group)
    return ClusterSpec(name=str(raw.get("name", path.stem)), gavel_gpu_type=gpu_type, groups=groups)

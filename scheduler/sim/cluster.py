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
        topology: pcie_8gpu_pix_pairs_2socket.txt   # file in topologies/ here or in <data>; optional
        name_format: "g{group}-n{k:04d}"  # optional (the default); {n} = k + 1
        labels: {gpu_model: P100}         # optional (the default)
        driver_version: ""                # optional; the simulated backend reports them
        cuda_version: ""

or, instead of ``node_groups``, ``node_list: <file under the data dir>``: a node list CSV in the
Alibaba trace's shape (``sn, cpu_milli, memory_mib, gpu, model``), read at load time so the data stays
in the shared data folder; its nodes keep their names and runs of identical rows become groups.

Shipped specs live in ``scheduler/sim/clusters/`` (their own topology files in ``clusters/topologies/``);
``--cluster NAME`` finds them by stem. The simulator and the platform's simulated backend both build
their clusters from these specs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scheduler.model import Gpu, Node

SPEC_DIR = Path(__file__).resolve().parent / "clusters"
# Topology files that ship with the specs (the demo cluster's), found before the data dir's.
SPEC_TOPOLOGY_DIR = SPEC_DIR / "topologies"
DEFAULT_NAME_FORMAT = "g{group}-n{k:04d}"


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
    # Where the topology file was found (the simulated backend re-reads it from its state file).
    topology_path: Path | None = None
    name_format: str = DEFAULT_NAME_FORMAT
    # Explicit node names (a node list's), one per node; overrides name_format.
    names: list[str] | None = None
    # None: the simulator's own label ({"gpu_model": <model>}).
    labels: dict[str, str] | None = None
    driver_version: str = ""
    cuda_version: str = ""

    def node_name(self, group_index: int, k: int) -> str:
        if self.names is not None:
            return self.names[k]
        return self.name_format.format(group=group_index, k=k, n=k + 1)

    def node_labels(self) -> dict[str, str]:
        return dict(self.labels) if self.labels is not None else {"gpu_model": self.gpu_model}


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
                        name=group.node_name(gi, k),
                        cpu_milli=group.cpu_cores * 1000,
                        memory_mib=group.memory_gib * 1024,
                        gpus=gpus,
                        labels=group.node_labels(),
                        driver_version=group.driver_version,
                        cuda_version=group.cuda_version,
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
    if isinstance(raw, dict) and isinstance(raw.get("node_list"), str):
        gpu_type = _gpu_type(raw, path)
        groups = _node_list_groups(path, raw["node_list"], data_dir)
        return ClusterSpec(name=str(raw.get("name", path.stem)), gavel_gpu_type=gpu_type, groups=groups)
    if not isinstance(raw, dict) or not isinstance(raw.get("node_groups"), list) or not raw["node_groups"]:
        raise ClusterSpecError(
            f"{path}: expected a mapping with a non-empty node_groups list (or a node_list)"
        )
    gpu_type = _gpu_type(raw, path)
    topo_dir = (data_dir / "topologies") if data_dir else None
    groups = []
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
            name_format=_name_format(g, where),
            labels=_labels(g, where),
            driver_version=str(g.get("driver_version", "")),
            cuda_version=str(g.get("cuda_version", "")),
        )
        if group.topology:
            topo = Path(group.topology)
            if not topo.is_absolute() and (SPEC_TOPOLOGY_DIR / topo).is_file():
                topo = SPEC_TOPOLOGY_DIR / topo
            elif not topo.is_absolute() and topo_dir is not None:
                topo = topo_dir / topo
            if not topo.is_file():
                raise ClusterSpecError(f"{where}: topology file not found: {topo}")
            text = topo.read_text(errors="replace")
            group.topology_path = topo
            group.links = parse_topology_matrix(text)
            group.topology_object = _topology_object(text, group.gpu_model)
            bad = [k for k in group.links if k[1] >= gpus]
            if bad:
                raise ClusterSpecError(f"{where}: topology has more GPUs than gpus={gpus}")
        groups.append(group)
    return ClusterSpec(name=str(raw.get("name", path.stem)), gavel_gpu_type=gpu_type, groups=groups)


def _gpu_type(raw: dict[str, Any], path: Path) -> str:
    gpu_type = str(raw.get("gavel_gpu_type", "v100"))
    if gpu_type not in ("k80", "p100", "v100"):
        raise ClusterSpecError(f"{path}: gavel_gpu_type must be k80, p100 or v100, got {gpu_type!r}")
    return gpu_type


def _name_format(raw: dict[str, Any], where: str) -> str:
    fmt = raw.get("name_format", DEFAULT_NAME_FORMAT)
    if not isinstance(fmt, str):
        raise ClusterSpecError(f"{where}: name_format must be a string, got {fmt!r}")
    try:
        first, second = fmt.format(group=0, k=0, n=1), fmt.format(group=0, k=1, n=2)
    except (KeyError, IndexError, ValueError):
        raise ClusterSpecError(
            f"{where}: name_format may use only {{group}}, {{k}} and {{n}}, got {fmt!r}"
        ) from None
    if first == second:
        raise ClusterSpecError(f"{where}: name_format must name nodes apart ({{k}} or {{n}}), got {fmt!r}")
    return fmt


def _labels(raw: dict[str, Any], where: str) -> dict[str, str] | None:
    labels = raw.get("labels")
    if labels is None:
        return None
    if not isinstance(labels, dict):
        raise ClusterSpecError(f"{where}: labels must be a mapping, got {labels!r}")
    return {str(k): str(v) for k, v in labels.items()}


def _node_list_groups(path: Path, node_list: str, data_dir: Path | None) -> list[NodeGroup]:
    """Groups from a node list CSV: each run of identical consecutive rows is one group, its nodes named
    as in the file (so a node's name means the same here as in the trace)."""
    from scheduler.frag.trace import TraceError, load_nodes

    csv_path = Path(node_list)
    if not csv_path.is_absolute():
        if data_dir is None:
            raise ClusterSpecError(f"{path}: node_list {node_list!r} needs the data dir")
        csv_path = data_dir / csv_path
    try:
        nodes = load_nodes(csv_path)
    except TraceError as exc:
        raise ClusterSpecError(f"{path}: node_list: {exc}") from None
    groups: list[NodeGroup] = []
    for node in nodes:
        if not node.gpus:
            continue  # a CPU-only node: the GPU scheduler never places on it
        if node.cpu_milli % 1000 or node.memory_mib % 1024:
            raise ClusterSpecError(
                f"{path}: node_list: {node.name} has {node.cpu_milli} CPU milli / {node.memory_mib} MiB, "
                "not whole cores and GiB"
            )
        shape = (len(node.gpus), node.gpus[0].model, node.gpus[0].memory_mib, node.cpu_milli, node.memory_mib)
        last = groups[-1] if groups else None
        if (
            last is not None
            and (
                last.gpus,
                last.gpu_model,
                last.gpu_memory_mib,
                last.cpu_cores * 1000,
                last.memory_gib * 1024,
            )
            == shape
        ):
            assert last.names is not None
            last.names.append(node.name)
            last.count += 1
            continue
        groups.append(
            NodeGroup(
                count=1,
                gpus=shape[0],
                gpu_model=shape[1],
                gpu_memory_mib=shape[2],
                cpu_cores=node.cpu_milli // 1000,
                memory_gib=node.memory_mib // 1024,
                names=[node.name],
            )
        )
    if not groups:
        raise ClusterSpecError(f"{path}: node_list {csv_path} has no GPU nodes")
    return groups

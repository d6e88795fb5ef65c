"""Clusters for the platform's simulated backend, from the simulator's YAML cluster specs.

One cluster-spec system serves both: ``scheduler/sim/clusters/<name>.yaml`` (``demo``, ``small``,
``philly-256``, ``alibaba-openb``, ...; see :mod:`scheduler.sim.cluster`). This module turns a spec
into the plain node dicts (JSON-able) the simulated backend keeps in its state file: the same node
names, order, sizes and labels the simulator builds, so a replay through the platform offers
``schedule()`` the cluster the simulator offers it. Each node also carries its GPU link classes
(``links``: the simulator's performance ground truth for multi-GPU jobs) and its topology file
(parsed into ``Node.topology``).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from scheduler.sim.cluster import SPEC_DIR, ClusterSpec, load_cluster_spec


def cluster_names() -> list[str]:
    """The shipped cluster specs' names."""
    return sorted(p.stem for p in SPEC_DIR.glob("*.yaml"))


def cluster_spec(name: str, data_dir: Path | None = None) -> list[dict[str, Any]]:
    """The node dicts of a shipped cluster spec (by name) or of a spec file (a path).

    ``data_dir`` holds the shared data (``topologies/``, node lists; default:
    ``scheduler.datapaths.default_data_dir()``). Raises ValueError
    (``scheduler.sim.cluster.ClusterSpecError``, one line naming the known specs) when the spec, a
    topology file or a node list is missing or malformed.
    """
    from scheduler.datapaths import default_data_dir

    data = data_dir or default_data_dir()
    path = Path(name) if Path(name).is_file() else SPEC_DIR / f"{name}.yaml"
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = 0  # not found: load_cluster_spec says so
    # The platform builds a backend per request (jobs.cluster.get_backend): parse each spec (and the
    # node list behind it) once per process, and hand every caller its own copy.
    return json.loads(_nodes_json(name, str(data), stamp))


@functools.lru_cache(maxsize=16)
def _nodes_json(name: str, data_dir: str, stamp: int) -> str:
    return json.dumps(node_dicts(load_cluster_spec(name, Path(data_dir))))


def node_dicts(spec: ClusterSpec) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    for gi, group in enumerate(spec.groups):
        topology_file = str(group.topology_path) if group.topology_path else ""
        links = [[a, b, cls] for (a, b), cls in sorted(group.links.items())]
        labels = group.node_labels()
        for k in range(group.count):
            nodes.append(
                {
                    "name": group.node_name(gi, k),
                    "cpu_milli": group.cpu_cores * 1000,
                    "memory_mib": group.memory_gib * 1024,
                    "gpu_model": group.gpu_model,
                    "gpu_count": group.gpus,
                    "gpu_memory_mib": group.gpu_memory_mib,
                    "labels": dict(labels),
                    "driver_version": group.driver_version,
                    "cuda_version": group.cuda_version,
                    "topology_file": topology_file,
                    "links": links,
                    "group": gi,
                }
            )
    return nodes


def node_links(spec: dict[str, Any]) -> dict[tuple[int, int], str]:
    """GPU link classes of a node dict ((a, b) with a < b -> NV, PIX, PXB, PHB, NODE or SYS)."""
    return {(int(a), int(b)): str(cls) for a, b, cls in spec.get("links") or ()}


@functools.lru_cache(maxsize=64)
def topology_from_file(path: str, gpu_model: str = "") -> Any:
    """``Node.topology`` parsed from an ``nvidia-smi topo -m`` file the way the simulator parses it
    (one object per file, shared by every node that has it); None when unreadable or rejected, which
    every plugin treats as "links unknown"."""
    from scheduler.sim.cluster import _topology_object

    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return None
    return _topology_object(text, gpu_model)

"""Reads for the Nodes page: every node of the cluster backend with its GPU models, driver, allocation
and health, from the same cluster view as ``GET /api/v1/cluster/`` (jobs.selectors.cluster_for_user),
so the page and the API can never disagree."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from jobs.cluster import BackendNotAvailable
from jobs.selectors import cluster_for_user
from scheduler.backends.base import BackendError


@dataclass(frozen=True)
class GpuRow:
    index: int
    model: str
    memory_mib: int
    allocated_milli: int
    utilization_pct: float | None
    teams: list[str]


@dataclass(frozen=True)
class NodeRow:
    name: str
    healthy: bool
    health: str
    virtual: bool
    gpu_models: str
    driver_version: str
    cuda_version: str
    cpu_milli: int
    used_cpu_milli: int
    memory_mib: int
    used_memory_mib: int
    gpu_milli: int
    allocated_gpu_milli: int
    gpus: list[GpuRow]

    @property
    def allocated_pct(self) -> int:
        return round(100 * self.allocated_gpu_milli / self.gpu_milli) if self.gpu_milli else 0


@dataclass(frozen=True)
class NodesPage:
    backend: str
    nodes: list[NodeRow]
    error: str

    @property
    def gpu_count(self) -> int:
        return sum(len(n.gpus) for n in self.nodes)

    @property
    def allocated_gpu_milli(self) -> int:
        return sum(n.allocated_gpu_milli for n in self.nodes)

    @property
    def healthy_count(self) -> int:
        return sum(1 for n in self.nodes if n.healthy)


def _models(gpus: list[dict[str, Any]]) -> str:
    """Like "8 × V100-SXM2-16GB", or "4 × T4, 2 × A100" on a mixed node."""
    counts = Counter(g.get("model") or "unknown" for g in gpus)
    return ", ".join(f"{n} × {model}" for model, n in counts.most_common()) or "no GPUs"


def _node_row(node: dict[str, Any]) -> NodeRow:
    gpus = [
        GpuRow(
            index=g["index"],
            model=g.get("model", ""),
            memory_mib=g.get("memory_mib", 0),
            allocated_milli=g.get("used_milli", 0),
            utilization_pct=g.get("utilization_pct"),
            teams=sorted({a.get("team") or "other" for a in g.get("allocations", [])}),
        )
        for g in node.get("gpus", [])
    ]
    healthy = bool(node.get("schedulable", True))
    return NodeRow(
        name=node["name"],
        healthy=healthy,
        # A backend marks a node unschedulable when it is cordoned, drained or not Ready.
        health="Ready" if healthy else "Not schedulable (cordoned, draining or not ready)",
        virtual=bool(node.get("virtual")),
        gpu_models=_models(node.get("gpus", [])),
        driver_version=node.get("driver_version") or "",
        cuda_version=node.get("cuda_version") or "",
        cpu_milli=node.get("cpu_milli", 0),
        used_cpu_milli=node.get("used_cpu_milli", 0),
        memory_mib=node.get("memory_mib", 0),
        used_memory_mib=node.get("used_memory_mib", 0),
        gpu_milli=1000 * len(gpus),
        allocated_gpu_milli=sum(g.allocated_milli for g in gpus),
        gpus=gpus,
    )


def nodes_page(*, user: Any) -> NodesPage:
    """The nodes as ``user`` may see them; an unreachable backend gives an empty list and its error."""
    try:
        view = cluster_for_user(user=user)
    except (BackendError, BackendNotAvailable) as exc:
        return NodesPage(backend="", nodes=[], error=f"The cluster cannot be reached right now: {exc}")
    nodes = sorted((_node_row(n) for n in view.get("nodes", [])), key=lambda n: n.name)
    return NodesPage(backend=str(view.get("backend", "")), nodes=nodes, error="")

"""Nodes of the snapshot from Kubernetes Node objects (as JSON dicts, camelCase keys).

GPU inventory comes from what the node agent published (``gpu-platform.io/gpus`` annotation: a JSON
list of ``{index, uuid, model, memory_mib, ...}``); without it, from NVIDIA GPU feature discovery labels
and the device plugin's ``nvidia.com/gpu`` capacity, so a cluster without our agent still schedules
whole GPUs.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from scheduler.backends.kubernetes import contract as c
from scheduler.model import Gpu, Node

MIB = 1024 * 1024


def cpu_milli(quantity: Any) -> int:
    """``"8"``, ``"7500m"`` -> milli-cores; unparsable or missing -> 0."""
    try:
        return int(parse_quantity(str(quantity)) * 1000) if quantity is not None else 0
    except ValueError:
        return 0


def memory_mib(quantity: Any) -> int:
    """``"32Gi"``, ``"1000M"``, bytes -> MiB (rounded down); unparsable or missing -> 0."""
    try:
        return int(parse_quantity(str(quantity)) / Decimal(MIB)) if quantity is not None else 0
    except ValueError:
        return 0


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


def _pct(value: Any) -> float | None:
    """A published utilisation in 0..100, or None when absent or malformed."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value <= 100 else None


def _published_gpus(annotations: dict[str, str]) -> list[Gpu] | None:
    raw = annotations.get(c.NODE_ANN_GPUS)
    if not raw:
        return None
    try:
        items = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(items, list):
        return None
    gpus = []
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            return None
        gpus.append(
            Gpu(
                index=_int(item.get("index"), position),
                model=str(item.get("model", "")),
                memory_mib=_int(item.get("memory_mib")),
                uuid=str(item.get("uuid", "")),
                utilization_pct=_pct(item.get("utilization_pct")),
            )
        )
    return sorted(gpus, key=lambda g: g.index)


def _discovered_gpus(labels: dict[str, str], capacity: dict[str, Any]) -> list[Gpu]:
    count = _int(capacity.get(c.DEVICE_PLUGIN_RESOURCE), _int(labels.get(c.GFD_COUNT)))
    model = labels.get(c.GFD_PRODUCT, "")
    memory = _int(labels.get(c.GFD_MEMORY))
    return [Gpu(index=i, model=model, memory_mib=memory) for i in range(count)]


def topology_matrix(annotations: dict[str, str]) -> dict[str, Any] | None:
    """The agent's link matrix (``{"gpus": [...], "links": [[...]]}`` in ``nvidia-smi topo -m``
    notation: X, NV<n>, PIX, PXB, PHB, NODE, SYS), or None when absent or malformed."""
    raw = annotations.get(c.NODE_ANN_TOPOLOGY)
    if not raw:
        return None
    try:
        matrix = json.loads(raw)
    except ValueError:
        return None
    links = matrix.get("links") if isinstance(matrix, dict) else None
    if not isinstance(links, list) or not all(isinstance(row, list) for row in links):
        return None
    return matrix


def _is_ready(status: dict[str, Any]) -> bool:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    # Emulated or freshly registered nodes without conditions: trust spec.unschedulable alone.
    return True


def node_from_kubernetes(obj: dict[str, Any], topology_builder: Any = None) -> Node:
    """A ``scheduler.model.Node`` (no usage yet) from a Node object.

    ``topology_builder(matrix) -> topology`` turns the published link matrix into the object the
    topology plugins expect; without one, ``Node.topology`` stays None (links unknown).
    """
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    labels: dict[str, str] = dict(meta.get("labels") or {})
    annotations: dict[str, str] = dict(meta.get("annotations") or {})
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    capacity = status.get("capacity") or allocatable
    gpus = _published_gpus(annotations)
    if gpus is None:
        gpus = _discovered_gpus(labels, capacity)
    matrix = topology_matrix(annotations)
    topology = None
    if matrix is not None and topology_builder is not None:
        try:
            topology = topology_builder(matrix)
        except (ValueError, KeyError, TypeError):
            topology = None  # a malformed matrix means "links unknown", never a failed snapshot
    return Node(
        name=str(meta.get("name", "")),
        cpu_milli=cpu_milli(allocatable.get("cpu")),
        memory_mib=memory_mib(allocatable.get("memory")),
        gpus=gpus,
        labels=labels,
        driver_version=labels.get(c.NODE_LABEL_DRIVER, ""),
        cuda_version=labels.get(c.NODE_LABEL_CUDA, ""),
        topology=topology,
        schedulable=not spec.get("unschedulable", False) and _is_ready(status),
    )


def gpu_uuids(node: Node) -> dict[int, str]:
    return {g.index: g.uuid for g in node.gpus if g.uuid}

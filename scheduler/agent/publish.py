"""The node agent's reading as Node labels (short, selectable) and annotations (full detail).

Labels follow NVIDIA GPU feature discovery in spirit (``gpu-platform.io/gpu.model`` ~
``nvidia.com/gpu.product``); annotations carry the per-GPU list and the link matrix that
``scheduler.backends.kubernetes.nodes`` reads back into the snapshot.
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

from scheduler.agent.inventory import NodeInventory
from scheduler.backends.kubernetes import contract as c

_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _label(text: str) -> str:
    """A label value from free text: ``NVIDIA A100-SXM4-80GB`` -> ``NVIDIA-A100-SXM4-80GB``."""
    return _LABEL_UNSAFE.sub("-", text).strip("-._")[:63].rstrip("-._")


def node_patch(inventory: NodeInventory, now: datetime.datetime | None = None) -> dict[str, Any]:
    """Strategic-merge patch body for the Node: labels and annotations, nothing else."""
    stamp = (now or datetime.datetime.now(tz=datetime.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    gpus = inventory.gpus
    labels = {
        c.NODE_LABEL_GPU_PRESENT: "true" if gpus else "false",
        c.NODE_LABEL_GPU_COUNT: str(len(gpus)),
        c.NODE_LABEL_GPU_MODEL: _label(inventory.model),
        c.NODE_LABEL_GPU_MEMORY_MIB: str(min((g.memory_mib for g in gpus), default=0)),
        c.NODE_LABEL_DRIVER: _label(inventory.driver_version),
        c.NODE_LABEL_CUDA: _label(inventory.cuda_version),
    }
    annotations = {
        c.NODE_ANN_GPUS: json.dumps([g.to_dict() for g in gpus], separators=(",", ":")),
        c.NODE_ANN_HEARTBEAT: stamp,
    }
    if inventory.topology is not None:
        annotations[c.NODE_ANN_TOPOLOGY] = json.dumps(inventory.topology, separators=(",", ":"))
    return {"metadata": {"labels": labels, "annotations": annotations}}


def publish(api: Any, node_name: str, inventory: NodeInventory, now: datetime.datetime | None = None) -> None:
    """Patch the Node through ``api`` (a ``kubernetes.client.CoreV1Api``)."""
    api.patch_node(node_name, node_patch(inventory, now))

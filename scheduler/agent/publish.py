"""What the node agent sends the platform.

* Its reading as Node labels (short, selectable) and annotations (full detail). Labels follow NVIDIA
  GPU feature discovery in spirit (``gpu-platform.io/gpu.model`` ~ ``nvidia.com/gpu.product``);
  annotations carry the per-GPU list and the link matrix that ``scheduler.backends.kubernetes.nodes``
  reads back into the snapshot.
* A solo run's samples (``scheduler.agent.profiling.Sample``), posted over HTTP to the platform's
  ``POST /api/v1/agent/solo-profiles/`` with the node token (``jobs.agent_api``), which stores them
  as the configuration's solo profile. ``post_solo_profile`` raises ``PublishError`` with one line
  (the platform's error message) when the post is refused or the platform cannot be reached.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import httpx

from scheduler.agent.inventory import NodeInventory
from scheduler.agent.profiling import Sample
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


SOLO_PROFILES_PATH = "/api/v1/agent/solo-profiles/"


class PublishError(Exception):
    """The platform refused or never received the agent's post; the message is one line."""


def solo_profile_body(
    *,
    image: str,
    command: str,
    gpu_model: str,
    samples: Sequence[Sample],
    warmup_s: float = 10.0,
    extra: dict[str, float | str | bool] | None = None,
) -> dict[str, Any]:
    """The JSON body of a solo-profile post (``extra``: batch_size, amp, model_family)."""
    body: dict[str, Any] = {
        "image": image,
        "command": command,
        "gpu_model": gpu_model,
        "warmup_s": warmup_s,
        "samples": [asdict(s) for s in samples],
    }
    body.update(extra or {})
    return body


def post_solo_profile(
    platform_url: str,
    token: str,
    body: dict[str, Any],
    *,
    timeout_s: float = 10.0,
    client: httpx.Client | None = None,
) -> dict[str, Any]:
    """POST ``body`` (``solo_profile_body``) to the platform; the stored profile as the platform
    returns it. ``client`` lets a caller reuse one connection pool (or a test transport)."""
    url = platform_url.rstrip("/") + SOLO_PROFILES_PATH
    if not token.strip():
        raise PublishError("no node agent token: set NODE_AGENT_TOKEN to the platform's node token")
    headers = {"Authorization": f"Bearer {token}"}
    try:
        if client is None:
            with httpx.Client(timeout=timeout_s) as own:
                response = own.post(url, json=body, headers=headers)
        else:
            response = client.post(url, json=body, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise PublishError(f"cannot reach the platform at {url}: {type(exc).__name__}: {exc}") from None
    if response.status_code != 201:
        try:
            message = str(response.json().get("message", ""))
        except ValueError:
            message = response.text[:200]
        raise PublishError(f"the platform refused the solo profile ({response.status_code}): {message}")
    result: dict[str, Any] = response.json()
    return result

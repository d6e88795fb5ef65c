"""The Kubernetes Service of a workspace (issue 25, docs/workspaces.md): a ClusterIP Service in front
of the workspace's pod, on the port it declared, so the platform's proxy reaches it at a stable name
(``http://ws-<job>.<namespace>.svc:<port>``) whatever node the pod runs on. No Ingress: the proxy is
the one way in, with the platform's sign-in and the workspace's token; docs/workspaces.md shows the
Ingress that exposes the proxy itself.

Pure: manifests as dicts, the pod's selector passed in by the backend (its own job labels).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Set by the platform on a workspace's task (workspaces.access.workspace_env); a batch job has none.
PORT_ENV = "GPU_PLATFORM_WORKSPACE_PORT"


def workspace_port(env: Mapping[str, str]) -> int | None:
    """The port a task's server listens on when it is a workspace, else None."""
    raw = env.get(PORT_ENV, "")
    return int(raw) if raw.isdigit() else None


def service_name(job_id: str) -> str:
    # DNS-1035: a letter first, so "ws-" and not the bare job id.
    return f"ws-{job_id}"


def service_body(
    *, job_id: str, namespace: str, port: int, selector: Mapping[str, str], labels: Mapping[str, str]
) -> dict[str, Any]:
    """The workspace's ClusterIP Service: ``port`` to the same port of the pod ``selector`` picks."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service_name(job_id),
            "namespace": namespace,
            "labels": dict(labels),
            "annotations": {"gpu-platform.io/job-id": job_id, "gpu-platform.io/kind": "workspace"},
        },
        "spec": {
            "type": "ClusterIP",
            "selector": dict(selector),
            "ports": [{"name": "http", "protocol": "TCP", "port": port, "targetPort": port}],
        },
    }


def service_target(*, job_id: str, namespace: str, port: int) -> str:
    """Where the proxy reaches the workspace through its Service (cluster DNS)."""
    return f"http://{service_name(job_id)}.{namespace}.svc:{port}"

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


class WorkspaceServices:
    """The Kubernetes backend's workspace side, mixed into KubernetesBackend: the Service is created
    with a workspace's pod and deleted with its job; the proxy asks ``workspace_target``."""

    namespace: str
    client: Any
    api: Any

    def ensure_workspace_service(self, spec: Any) -> None:
        """Create the Service of ``spec``'s job when it is a workspace (409: it exists, fine)."""
        port = workspace_port(spec.env)
        if port is None:
            return
        from scheduler.backends.kubernetes.pods import job_labels

        labels = job_labels(spec.job_id)
        body = service_body(
            job_id=spec.job_id, namespace=self.namespace, port=port, selector=labels, labels=labels
        )
        self.client.call(
            f"create service {body['metadata']['name']}",
            self.api.create_namespaced_service,
            self.namespace,
            body,
            tolerate=(409,),
        )

    def delete_workspace_service(self, job_id: str) -> None:
        """Delete the job's workspace Service if it has one (a read first: batch jobs have none)."""
        found = self.client.call(
            f"read service {service_name(job_id)}",
            self.api.read_namespaced_service,
            service_name(job_id),
            self.namespace,
            tolerate=(404,),
        )
        if getattr(found, "metadata", None) is None:
            return
        self.client.call(
            f"delete service {service_name(job_id)}",
            self.api.delete_namespaced_service,
            service_name(job_id),
            self.namespace,
            tolerate=(404,),
        )

    def workspace_target(self, job_id: str) -> str | None:
        """The Service's address while the workspace's pod runs, else None."""
        from scheduler.backends.base import TaskPhase

        # The backend's own task_statuses (this class is only ever mixed into it).
        statuses = self.task_statuses(job_id)  # type: ignore[attr-defined]
        running = [s for s in statuses if s.phase is TaskPhase.RUNNING]
        if not running:
            return None
        service = self.client.call(
            f"read service {service_name(job_id)}",
            self.api.read_namespaced_service,
            service_name(job_id),
            self.namespace,
            tolerate=(404,),
        )
        ports = getattr(getattr(service, "spec", None), "ports", None) or []
        return service_target(job_id=job_id, namespace=self.namespace, port=ports[0].port) if ports else None

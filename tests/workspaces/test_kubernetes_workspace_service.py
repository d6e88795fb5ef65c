"""The Kubernetes Service of a workspace is a valid manifest that selects the workspace's pod on its
declared port, and names the address the proxy reaches."""

from __future__ import annotations

import pytest

from scheduler.backends.workspace_service import service_body, service_target, workspace_port

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is a dev dependency"
)


def test_a_workspace_service_is_a_valid_cluster_ip_service_on_the_declared_port() -> None:
    selector = {"gpu-platform.io/job": "42", "app.kubernetes.io/managed-by": "gpu-platform"}
    body = service_body(job_id="42", namespace="research", port=8888, selector=selector, labels=selector)

    kubernetes_validate.validate(body, "1.31", strict=True)
    assert body["metadata"]["name"] == "ws-42" and body["spec"]["selector"] == selector
    assert body["spec"]["ports"] == [{"name": "http", "protocol": "TCP", "port": 8888, "targetPort": 8888}]
    assert service_target(job_id="42", namespace="research", port=8888) == "http://ws-42.research.svc:8888"


def test_only_a_task_with_the_platforms_workspace_port_is_a_workspace() -> None:
    assert workspace_port({"GPU_PLATFORM_WORKSPACE_PORT": "8888"}) == 8888
    assert workspace_port({"MASTER_PORT": "29500"}) is None

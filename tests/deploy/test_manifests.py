"""deploy/ manifests validate against the Kubernetes schemas and keep their promises (least privilege,
non-root, references that resolve)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
MANIFESTS = sorted(p for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


ALL = [doc for path in MANIFESTS for doc in documents(path)]


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for doc in ALL if doc["kind"] == kind]


def named(kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in of_kind(kind) if d["metadata"]["name"] == name]
    return doc


def pod_specs() -> list[tuple[str, dict[str, Any]]]:
    return [
        (d["metadata"]["name"], d["spec"]["template"]["spec"])
        for d in ALL
        if d["kind"] in ("Deployment", "DaemonSet")
    ]


@pytest.mark.parametrize(
    "doc",
    ALL,
    ids=[f"{d['kind']}/{d['metadata'].get('namespace', '-')}/{d['metadata']['name']}" for d in ALL],
)
def test_every_manifest_validates_strictly_against_the_kubernetes_schema(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_kustomization_lists_every_manifest_except_the_example_secret() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())

    assert sorted(kustomization["resources"]) == sorted(
        p.name for p in MANIFESTS if p.name != "secret.example.yaml"
    )


def test_the_platform_has_web_worker_beat_a_web_service_and_the_node_agent_daemonset() -> None:
    deployments = {d["metadata"]["name"]: d for d in of_kind("Deployment")}
    assert sorted(deployments) == ["gpu-platform-beat", "gpu-platform-web", "gpu-platform-worker"]
    assert deployments["gpu-platform-beat"]["spec"]["replicas"] == 1
    assert deployments["gpu-platform-beat"]["spec"]["strategy"]["type"] == "Recreate"
    service = named("Service", "gpu-platform-web")
    assert (
        service["spec"]["selector"]
        == deployments["gpu-platform-web"]["spec"]["template"]["metadata"]["labels"]
    )
    (agent,) = of_kind("DaemonSet")
    container = agent["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:3] == ["python", "-m", "scheduler.agent"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert "resources" in container and "nvidia.com/gpu" not in str(container["resources"])


def test_every_container_runs_non_root_without_privilege_escalation() -> None:
    for name, spec in pod_specs():
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["runAsUser"] > 0, name
        for container in spec.get("initContainers", []) + spec["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, (name, container["name"])
            assert context["capabilities"]["drop"] == ["ALL"], (name, container["name"])
            assert not context.get("privileged", False), (name, container["name"])


def test_config_and_secret_references_resolve() -> None:
    config_maps = {d["metadata"]["name"]: d for d in of_kind("ConfigMap")}
    secrets = {d["metadata"]["name"]: d for d in of_kind("Secret")}
    accounts = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in of_kind("ServiceAccount")}
    workloads = [d for d in ALL if d["kind"] in ("Deployment", "DaemonSet")]
    for workload in workloads:
        spec = workload["spec"]["template"]["spec"]
        namespace = workload["metadata"]["namespace"]
        assert (namespace, spec["serviceAccountName"]) in accounts
        for container in spec.get("initContainers", []) + spec["containers"]:
            for source in container.get("envFrom", []):
                assert source["configMapRef"]["name"] in config_maps
            for item in container.get("env", []):
                ref = (item.get("valueFrom") or {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secrets[ref["name"]]["stringData"]
    config = config_maps["gpu-platform-config"]["data"]
    assert config["CLUSTER_BACKEND"] == "kubernetes"
    assert config["KUBERNETES_NAMESPACE"] in {d["metadata"]["name"] for d in of_kind("Namespace")}


def rules_of(kind: str, name: str) -> list[dict[str, Any]]:
    return [rule for doc in of_kind(kind) if doc["metadata"]["name"] == name for rule in doc["rules"]]


def grants(rules: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(resource, verb) for rule in rules for resource in rule["resources"] for verb in rule["verbs"]}


def test_rbac_is_least_privilege() -> None:
    for doc in of_kind("ClusterRole") + of_kind("Role"):
        for rule in doc["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"], doc["metadata"]["name"]
            assert "secrets" not in rule["resources"], doc["metadata"]["name"]
    assert grants(rules_of("ClusterRole", "gpu-platform-node-agent")) == {
        ("nodes", "get"),
        ("nodes", "patch"),
        ("pods", "list"),  # the report loop's own node's pods; it reads no Secret and writes no pod
    }
    cluster_wide = grants(rules_of("ClusterRole", "gpu-platform-scheduler"))
    assert ("pods/binding", "create") in cluster_wide
    # Creating and deleting pods is confined to the jobs namespace.
    assert not {("pods", "create"), ("pods", "delete"), ("services", "create")} & cluster_wide
    (jobs_role,) = [d for d in of_kind("Role") if d["metadata"]["name"] == "gpu-platform-scheduler"]
    assert jobs_role["metadata"]["namespace"] == "gpu-jobs"
    assert {("pods", "create"), ("pods", "delete"), ("services", "create"), ("pods/log", "get")} <= grants(
        jobs_role["rules"]
    )
    web = grants(rules_of("Role", "gpu-platform-web")) | grants(rules_of("ClusterRole", "gpu-platform-web"))
    assert all(verb in ("get", "list", "watch") for _, verb in web)


def test_every_binding_binds_a_role_that_exists_to_an_account_that_exists() -> None:
    accounts = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in of_kind("ServiceAccount")}
    for binding in of_kind("ClusterRoleBinding") + of_kind("RoleBinding"):
        role = binding["roleRef"]
        assert [d for d in of_kind(role["kind"]) if d["metadata"]["name"] == role["name"]], binding[
            "metadata"
        ]["name"]
        for subject in binding["subjects"]:
            assert (subject["namespace"], subject["name"]) in accounts

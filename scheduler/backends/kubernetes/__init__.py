"""Kubernetes cluster backend (official ``kubernetes`` client). Django-free: configuration comes in as
arguments; the platform passes its settings (KUBERNETES_NAMESPACE, KUBERNETES_SCHEDULER_NAME, ...)."""

from __future__ import annotations

import os
from typing import Any

from scheduler.backends.base import PermanentBackendError
from scheduler.backends.kubernetes.backend import KubernetesBackend


def create_kubernetes_backend(
    namespace: str,
    scheduler_name: str,
    kubeconfig: str | None = None,
    in_cluster: bool = False,
    **options: Any,
) -> KubernetesBackend:
    """Factory used by the platform when ``CLUSTER_BACKEND == "kubernetes"``.

    ``in_cluster`` reads the pod's service account; otherwise ``kubeconfig`` (or ``$KUBECONFIG`` /
    ``~/.kube/config`` when None). With neither given, inside a pod (``$KUBERNETES_SERVICE_HOST`` set,
    no kubeconfig file) the service account is used, so the platform can call this with just the
    namespace and scheduler name. ``options`` go to ``KubernetesBackend`` (e.g. ``gpu_resource_name``,
    ``watch_timeout_s``, ``checkpoint_volume``). A missing or broken configuration raises PermanentBackendError (one line).
    """
    import kubernetes.client
    import kubernetes.config

    if not namespace or not scheduler_name:
        raise PermanentBackendError("the Kubernetes backend needs a namespace and a scheduler name")
    if not in_cluster and kubeconfig is None and not os.environ.get("KUBECONFIG"):
        # Inside a pod with no kubeconfig given: the platform's Deployments (deploy/) run this way.
        in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not os.path.exists(
            os.path.expanduser("~/.kube/config")
        )
    configuration = kubernetes.client.Configuration()
    # One retry layer, ours, with backoff and a clear final error; urllib3's silent retries would
    # multiply every attempt.
    configuration.retries = False
    try:
        if in_cluster:
            kubernetes.config.load_incluster_config(client_configuration=configuration)
        else:
            kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    except (kubernetes.config.ConfigException, OSError, TypeError, ValueError) as exc:
        where = "in-cluster service account" if in_cluster else f"kubeconfig {kubeconfig or '(default)'}"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PermanentBackendError(f"cannot load Kubernetes configuration from {where}: {first}") from None
    return KubernetesBackend(
        kubernetes.client.ApiClient(configuration),
        namespace=namespace,
        scheduler_name=scheduler_name,
        **options,
    )


__all__ = ["KubernetesBackend", "create_kubernetes_backend"]

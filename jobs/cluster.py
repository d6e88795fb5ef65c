"""The platform's cluster backend, chosen by settings, and a JSON view of the cluster for the API.

``get_backend()`` builds the backend named by ``settings.CLUSTER_BACKEND``:

* ``simulated`` (default): :class:`scheduler.backends.simulated.SimulatedBackend` on the state file
  ``SIM_STATE_PATH`` with cluster ``SIM_CLUSTER`` and time scale ``SIM_TIME_SCALE``;
* ``kubernetes``: ``scheduler.backends.kubernetes.create_kubernetes_backend(namespace, scheduler_name)``;
* ``local``: ``scheduler.backends.local.create_local_backend(LOCAL_WORK_DIR, ...)`` with the other
  ``LOCAL_*`` settings: tasks run as processes (or containers) on this machine.

The other backends are imported lazily, so their client libraries are only needed when chosen.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from scheduler.backends.base import ClusterBackend
from scheduler.model import Node

KNOWN_BACKENDS = ("simulated", "kubernetes", "local")


class BackendNotAvailable(RuntimeError):
    """The configured backend cannot be built (unknown name or its module is missing)."""


def _optional_factory(module: str, factory: str) -> Any:
    try:
        return getattr(importlib.import_module(module), factory)
    except (ImportError, AttributeError) as exc:
        raise BackendNotAvailable(f"{module}.{factory} is not available: {exc}") from exc


def get_backend(name: str | None = None) -> ClusterBackend:
    """The configured cluster backend. Cheap: backends keep their state outside the object."""
    name = name or settings.CLUSTER_BACKEND
    if name == "simulated":
        from scheduler.backends.simulated import SimulatedBackend
        from scheduler.backends.simulated_throughput import platform_ground_truth
        from scheduler.datapaths import default_data_dir

        return SimulatedBackend(
            settings.SIM_STATE_PATH,
            cluster=settings.SIM_CLUSTER,
            time_scale=settings.SIM_TIME_SCALE,
            # Progress rates and reported throughputs from the Gavel pairs (issue 21), when present.
            perf=platform_ground_truth(default_data_dir(), settings.SIM_GROUND_TRUTH_GPU),
        )
    if name == "kubernetes":
        factory = _optional_factory("scheduler.backends.kubernetes", "create_kubernetes_backend")
        return factory(
            namespace=settings.KUBERNETES_NAMESPACE,
            scheduler_name=settings.KUBERNETES_SCHEDULER_NAME,
            checkpoint_volume=getattr(settings, "KUBERNETES_CHECKPOINT_VOLUME", "") or None,
        )
    if name == "local":
        factory = _optional_factory("scheduler.backends.local", "create_local_backend")
        return factory(
            settings.LOCAL_WORK_DIR,
            node_name=settings.LOCAL_NODE_NAME,
            gpu_mode=settings.LOCAL_GPUS,
            virtual_gpus=settings.LOCAL_VIRTUAL_GPUS,
            virtual_gpu_model=settings.LOCAL_VIRTUAL_GPU_MODEL,
            virtual_gpu_memory_mib=settings.LOCAL_VIRTUAL_GPU_MEMORY_MIB,
            cpu_milli=settings.LOCAL_CPU_MILLI or None,
            memory_mib=settings.LOCAL_MEMORY_MIB or None,
            stop_grace_s=settings.LOCAL_STOP_GRACE_SECONDS,
            containers_mode=settings.LOCAL_CONTAINERS,
            docker_host=settings.LOCAL_DOCKER_HOST,
            passthrough_env=tuple(settings.LOCAL_PASSTHROUGH_ENV),
            **local_job_identity(),
        )
    raise BackendNotAvailable(f"unknown CLUSTER_BACKEND {name!r}; known: {', '.join(KNOWN_BACKENDS)}")


def local_job_identity() -> dict[str, Any]:
    """``job_user`` and ``job_uid_range`` for the local backend: jobs switch users only when the
    platform runs as root (anyone else cannot; jobs.checks warns or refuses then)."""
    from scheduler.backends.local import parse_uid_range

    user = getattr(settings, "LOCAL_JOB_USER", "")
    if not user or os.geteuid() != 0:
        return {}
    try:
        uids = parse_uid_range(getattr(settings, "LOCAL_JOB_UID_RANGE", ""))
    except ValueError as exc:
        raise BackendNotAvailable(f"LOCAL_JOB_UID_RANGE: {exc}") from None
    return {"job_user": user, "job_uid_range": uids}


@dataclass(frozen=True)
class NodeCapacity:
    """What the submit-time checks read of a node (jobs.services.cluster_problems): its size, never
    what runs on it. Nodes of one shape are one entry of a :class:`ClusterCapacity`."""

    schedulable: bool
    cpu_milli: int
    memory_mib: int
    gpu_count: int
    gpu_model: str  # the node's model (its first GPU's), as Node.gpu_model
    gpu_models: frozenset[str]  # the models of all its GPUs
    gpu_memory_mib: int  # its largest GPU's memory
    driver_version: str

    @classmethod
    def of(cls, node: Node) -> NodeCapacity:
        return cls(
            schedulable=bool(node.schedulable),
            cpu_milli=node.cpu_milli,
            memory_mib=node.memory_mib,
            gpu_count=len(node.gpus),
            gpu_model=node.gpu_model,
            gpu_models=frozenset(g.model for g in node.gpus),
            gpu_memory_mib=max((g.memory_mib for g in node.gpus), default=0),
            driver_version=node.driver_version,
        )


@dataclass(frozen=True)
class ClusterCapacity:
    """The distinct node shapes of the cluster (a 1,213-node cluster has a handful): every check of
    what could never run (most GPUs on a node, GPU models, largest GPU memory, CPU, memory, drivers)
    is a max, a set or an "any" over nodes, so it reads the same over the shapes as over the nodes."""

    nodes: tuple[NodeCapacity, ...]

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> ClusterCapacity:
        shapes = {NodeCapacity.of(node): None for node in nodes}  # first-seen order, duplicates once
        return cls(nodes=tuple(shapes))


# Capacity summaries by the backend's node-list version (SimulatedBackend.node_list_version): the
# platform builds a backend per request, and a summary read through snapshot() parses the whole
# state (every task included) on every submit. A few entries: versions only move forward.
_CAPACITY: dict[Hashable, ClusterCapacity] = {}
_CAPACITY_ENTRIES = 8


def cluster_capacity(backend: ClusterBackend | None = None) -> ClusterCapacity:
    """The cluster's node shapes for the submit-time checks. Backends that say when their node list
    changes (``node_list_version()`` and ``node_list()``, the simulated one) are read once per version
    per process; any other backend is asked for a snapshot each time, as before."""
    backend = backend or get_backend()
    # Looked up on the class: a stand-in (a test's Mock) answers any attribute of its instances.
    if not (hasattr(type(backend), "node_list_version") and hasattr(type(backend), "node_list")):
        return ClusterCapacity.of(backend.snapshot().nodes)
    version = backend.node_list_version()  # type: ignore[attr-defined]
    if version is not None and (kept := _CAPACITY.get(version)) is not None:
        return kept
    version, nodes = backend.node_list()  # type: ignore[attr-defined]
    capacity = ClusterCapacity.of(nodes)
    if len(_CAPACITY) >= _CAPACITY_ENTRIES:
        _CAPACITY.clear()
    _CAPACITY[version] = capacity
    return capacity


def _topology_summary(topology: Any) -> Any:
    """A short JSON-able description of a node's link topology (None when unknown)."""
    if topology is None:
        return None
    to_dict = getattr(topology, "to_dict", None)
    if callable(to_dict):
        data = to_dict()
        if isinstance(data, dict):
            # Keep the matrix (small: n x n link names) and drop bulky extras the API does not need.
            keep = ("links", "cpu_affinity", "nvswitch", "gpu_model", "source")
            return {k: data[k] for k in keep if k in data} or data
    return str(topology)


def cluster_view(backend: ClusterBackend | None = None) -> dict[str, Any]:
    """Nodes and GPUs with per-GPU allocation, for ``GET /api/v1/cluster/``.

    Each allocation names the task, its job id (the platform's Job primary key when the task is
    ours), the job's team, and the milli-GPU and GPU memory it holds on that GPU.
    """
    from jobs.models import Job  # late: keeps this module importable from settings-time checks

    backend = backend or get_backend()
    snapshot = backend.snapshot()
    job_ids = {int(p.job_id) for p in snapshot.running if str(p.job_id).isdigit()}
    teams = dict(Job.objects.filter(pk__in=job_ids).values_list("pk", "team__slug"))
    allocations: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for p in snapshot.running:
        job_pk = int(p.job_id) if str(p.job_id).isdigit() else None
        for idx in p.gpu_indices:
            allocations.setdefault((p.node, idx), []).append(
                {
                    "job_id": job_pk if job_pk is not None else p.job_id,
                    "task_id": p.task_id,
                    "team": teams.get(job_pk, "") if job_pk is not None else "",
                    "gpu_milli": p.gpu_milli,
                    "gpu_memory_mib": p.gpu_memory_mib,
                }
            )
    nodes = []
    totals = {"gpus": 0, "gpu_milli": 0, "used_gpu_milli": 0}
    for node in snapshot.nodes:
        gpus = []
        for gpu in node.gpus:
            gpus.append(
                {
                    "index": gpu.index,
                    "uuid": gpu.uuid,
                    "model": gpu.model,
                    "memory_mib": gpu.memory_mib,
                    "used_milli": gpu.used_milli,
                    "utilization_pct": gpu.utilization_pct,
                    "used_memory_mib": gpu.used_memory_mib,
                    "free_milli": gpu.free_milli,
                    "free_memory_mib": gpu.free_memory_mib,
                    "allocations": allocations.get((node.name, gpu.index), []),
                }
            )
            totals["gpus"] += 1
            totals["gpu_milli"] += 1000
            totals["used_gpu_milli"] += gpu.used_milli
        nodes.append(
            {
                "name": node.name,
                "schedulable": node.schedulable,
                # Simulated nodes, and local nodes without a driver (virtual GPUs), are not real hardware.
                "virtual": getattr(backend, "name", "") == "simulated"
                or node.labels.get("gpu-platform.io/virtual") == "true",
                "cpu_milli": node.cpu_milli,
                "used_cpu_milli": node.used_cpu_milli,
                "memory_mib": node.memory_mib,
                "used_memory_mib": node.used_memory_mib,
                "gpu_model": node.gpu_model,
                "driver_version": node.driver_version,
                "cuda_version": node.cuda_version,
                "labels": node.labels,
                "topology": _topology_summary(node.topology),
                "gpus": gpus,
            }
        )
    return {
        "backend": getattr(backend, "name", type(backend).__name__),
        "nodes": nodes,
        "totals": totals,
        "running_tasks": len(snapshot.running),
    }

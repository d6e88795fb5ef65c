"""KubernetesBackend: the ClusterBackend over the Kubernetes API (official ``kubernetes`` client).

How it maps the protocol (scheduler/backends/base.py) onto the API:

- ``snapshot()``: Nodes (GPU inventory published by the node agent) plus every live pod: ours and
  outside pods bound by us carry their GPU assignment in annotations, so a restarted scheduler rebuilds
  every allocation from the cluster; other pods only consume CPU and memory.
- ``bind()``: one pod per task, created unbound with our ``schedulerName`` (no other scheduler touches
  it), then assigned with the Binding subresource. Tasks of a distributed job (``world_size > 1``) get a
  headless Service and are bound together once every rank's pod exists: all or none. ``bind_job()`` does
  the same for a whole gang in one call. Names are deterministic, so a repeat is harmless: 409 on create
  or bind means done.
- ``task_statuses()``: a pod cache kept current by a watch resumed from the last resourceVersion; a 410
  Gone (history compacted) or any broken watch falls back to a fresh list.
- ``delete_job()``: deletes the job's pods and Service; 404 means already gone.
- ``preempt_job()``: marks the job's live pods ``gpu-platform.io/preempted`` and deletes them with
  ``gracePeriodSeconds`` = the grace (the kubelet sends SIGTERM, then SIGKILL when it ends). While they
  terminate they still hold their GPUs; once stopped or gone they are reported FAILED with a message
  starting "preempted" (to a process that saw them before they went). The Service stays for the next
  run. Every pod mounts the job's sub-folder of ``KUBERNETES_CHECKPOINT_VOLUME`` (a PVC or a hostPath)
  at ``/checkpoints`` = ``CHECKPOINT_DIR``, and a resumed run (``spec.resume``) gets ``RESUME=1``.
- ``logs()``: the main container's log through the API. A running task's ``throughput`` is the
  contract's ``[progress] throughput=X`` line (scheduler.backends.throughput) at the end of that log,
  read at most once per ``throughput_interval_s`` per pod.

Modules: ``client`` (API calls with retries and their one-line errors), ``watch`` (the pod cache and its
relist), ``pods`` / ``nodes`` / ``contract`` (object shapes and annotations); this one is the protocol.
"""

from __future__ import annotations

import logging
import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import kubernetes.client
import kubernetes.watch

from scheduler.backends.base import (
    PermanentBackendError,
    PlacementConflictError,
    TaskPhase,
    TaskSpec,
    TaskStatus,
    TransientBackendError,
)
from scheduler.backends.kubernetes import contract as c
from scheduler.backends.kubernetes import pods as p
from scheduler.backends.kubernetes.client import ApiCaller, Tolerated
from scheduler.backends.kubernetes.nodes import gpu_uuids, node_from_kubernetes
from scheduler.backends.kubernetes.watch import PodWatch
from scheduler.backends.throughput import parse_log
from scheduler.backends.workspace_service import WorkspaceServices
from scheduler.model import GPU_MILLI, ClusterSnapshot, JobRequest, Node, Placement, reserve

log = logging.getLogger(__name__)


class KubernetesBackend(WorkspaceServices):
    """ClusterBackend for one namespace of one cluster. Safe to call from several worker processes:
    every write is idempotent and the cluster, not this object, holds the state."""

    name = "kubernetes"

    def __init__(
        self,
        api_client: kubernetes.client.ApiClient,
        *,
        namespace: str,
        scheduler_name: str,
        gpu_resource_name: str | None = None,
        image_pull_secret: str | None = None,
        mps_pipe_directory: str | None = None,
        checkpoint_volume: str | None = None,
        cluster_scope: bool = True,
        max_attempts: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 10.0,
        request_timeout_s: float = 30.0,
        watch_timeout_s: float = 2.0,
        resync_s: float = 300.0,
        delete_grace_period_s: int = 30,
        log_tail_lines: int = 5000,
        throughput_tail_lines: int = 200,
        throughput_interval_s: float = 30.0,
        topology_builder: Callable[[dict[str, Any]], Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        try:
            volume = p.parse_checkpoint_volume(checkpoint_volume)
        except ValueError as exc:
            raise PermanentBackendError(f"KUBERNETES_CHECKPOINT_VOLUME: {exc}") from None
        self.client = ApiCaller(
            api_client,
            namespace=namespace,
            max_attempts=max_attempts,
            backoff_s=backoff_s,
            max_backoff_s=max_backoff_s,
            request_timeout_s=request_timeout_s,
            sleep=sleep,
            rng=rng,
        )
        self.api = self.client.api
        self.namespace = namespace
        self.scheduler_name = scheduler_name
        self.options = p.PodOptions(
            namespace=namespace,
            scheduler_name=scheduler_name,
            gpu_resource_name=gpu_resource_name,
            image_pull_secret=image_pull_secret,
            mps_pipe_directory=mps_pipe_directory,
            checkpoint_volume=volume,
        )
        self.cluster_scope = cluster_scope
        self.delete_grace_period_s = delete_grace_period_s
        self.log_tail_lines = log_tail_lines
        self.throughput_tail_lines = throughput_tail_lines
        self.throughput_interval_s = throughput_interval_s
        # Pod name -> (when its log was last read, the throughput it last reported): a pod's log is
        # read at most once per interval, and a value stays until a newer one scrolls in.
        self._throughput: dict[str, tuple[float, float | None]] = {}
        self.topology_builder = (
            topology_builder if topology_builder is not None else default_topology_builder()
        )
        self.clock = clock
        self.watch = PodWatch(self.client, watch_timeout_s=watch_timeout_s, resync_s=resync_s, clock=clock)
        self._uuids: dict[str, dict[int, str]] = {}

    # ------------------------------------------------------------------ snapshot

    def _list_nodes(self) -> list[dict[str, Any]]:
        result = self.client.call("list nodes", self.api.list_node)
        return [self.client.sanitize(item) for item in result.items]

    def _list_live_pods(self) -> list[dict[str, Any]]:
        # Finished pods hold no resources; the field selector saves bandwidth where the server honours
        # it, and the filter below keeps us right where it does not.
        selector = "status.phase!=Succeeded,status.phase!=Failed"
        if self.cluster_scope:
            result = self.client.call(
                "list pods in all namespaces", self.api.list_pod_for_all_namespaces, field_selector=selector
            )
        else:
            result = self.client.call(
                f"list pods in {self.namespace}",
                self.api.list_namespaced_pod,
                self.namespace,
                field_selector=selector,
            )
        return [
            pod for pod in (self.client.sanitize(item) for item in result.items) if not p.is_finished(pod)
        ]

    def snapshot(self) -> ClusterSnapshot:
        """Nodes with usage and the running placements, rebuilt from Nodes and pod annotations."""
        nodes = [node_from_kubernetes(obj, self.topology_builder) for obj in self._list_nodes()]
        by_name = {node.name: node for node in nodes}
        self._uuids = {node.name: gpu_uuids(node) for node in nodes}
        running: list[Placement] = []
        device_plugin_pods: list[tuple[Node, dict[str, Any]]] = []
        for pod in sorted(self._list_live_pods(), key=p.creation_key):
            placement = p.placement_from_pod(pod)
            node_name = placement.node if placement else ((pod.get("spec") or {}).get("nodeName") or "")
            node = by_name.get(node_name)
            if node is None:
                continue
            if placement is None:
                cpu, memory = p.pod_requests(pod)
                node.used_cpu_milli += cpu
                node.used_memory_mib += memory
                device_plugin_pods.append((node, pod))
                continue
            if any(i >= len(node.gpus) for i in placement.gpu_indices):
                log.warning(
                    "pod %s names GPUs %s that node %s does not have",
                    p.name_of(pod),
                    placement.gpu_indices,
                    node.name,
                )
                placement.gpu_indices = tuple(i for i in placement.gpu_indices if i < len(node.gpus))
            reserve(node, placement)
            running.append(placement)
        for node, pod in device_plugin_pods:
            _hold_device_plugin_gpus(node, pod)
        return ClusterSnapshot(nodes=nodes, running=running, now=self.clock())

    # ------------------------------------------------------------------ bind

    def _node_uuids(self, node: str) -> dict[int, str]:
        if node not in self._uuids:
            result = self.client.call(f"read node {node}", self.api.read_node, node, tolerate=(404,))
            if isinstance(result, Tolerated):
                raise PlacementConflictError(f"node {node!r} no longer exists; the placement is stale")
            self._uuids[node] = gpu_uuids(node_from_kubernetes(self.client.sanitize(result)))
        return self._uuids[node]

    def _ensure_service(self, job_id: str) -> None:
        body = p.service_body(job_id, self.options)
        self.client.call(
            f"create service {body['metadata']['name']}",
            self.api.create_namespaced_service,
            self.namespace,
            body,
            tolerate=(409,),
        )

    def _check_capacity(self, placements: Sequence[Placement]) -> None:
        """Refuse placements whose GPUs the cluster already gives to someone else.

        The decision was made on a snapshot; another cycle (one whose lease ran out while it was slow),
        a restarted scheduler or an outside pod may have taken the GPUs since. The pod annotations
        are the record of what each of our pods holds (as the simulated backend's state is), so they
        are read again here, right before the pods are created: every live pod on the node except
        this job's own (a repeated bind of the same job is not a conflict). Raises
        ``PlacementConflictError`` when a GPU would go over 1000 milli-GPU or its memory.
        """
        if not placements:
            return
        job_id = placements[0].job_id
        wanted = {pl.node for pl in placements}
        nodes: dict[str, Node] = {}
        for name in wanted:
            result = self.client.call(f"read node {name}", self.api.read_node, name, tolerate=(404,))
            if isinstance(result, Tolerated):
                raise PlacementConflictError(f"node {name!r} no longer exists; the placement is stale")
            nodes[name] = node_from_kubernetes(self.client.sanitize(result))
        for pod in self._list_live_pods():
            if p.job_id_of(pod) == job_id and p.is_ours(pod):
                continue
            held = p.placement_from_pod(pod)
            if held is None:
                node = nodes.get((pod.get("spec") or {}).get("nodeName") or "")
                if node is not None:
                    _hold_device_plugin_gpus(node, pod)
                continue
            node = nodes.get(held.node)
            if node is None:
                continue
            held.gpu_indices = tuple(i for i in held.gpu_indices if i < len(node.gpus))
            reserve(node, held)
        for pl in placements:
            node = nodes[pl.node]
            for idx in pl.gpu_indices:
                if idx >= len(node.gpus):
                    raise PlacementConflictError(f"node {pl.node} has no GPU {idx}; the placement is stale")
                gpu = node.gpus[idx]
                if (
                    gpu.used_milli + pl.gpu_milli > GPU_MILLI
                    or gpu.used_memory_mib + pl.gpu_memory_mib > gpu.memory_mib
                ):
                    raise PlacementConflictError(
                        f"task {pl.task_id} does not fit on {pl.node} GPU {idx}: {gpu.used_milli} milli-GPU "
                        f"and {gpu.used_memory_mib} MiB already allocated ({', '.join(gpu.tenants)})"
                    )
            reserve(node, pl)  # the job's own tasks must fit together too

    def _create_pod(self, spec: TaskSpec, placement: Placement) -> dict[str, Any]:
        """Create the task's pod (unbound) and return it; an existing one with the same placement is
        the result of an earlier attempt and is returned as is."""
        body = p.pod_body(spec, placement, self.options, self._node_uuids(placement.node))
        name = body["metadata"]["name"]
        result = self.client.call(
            f"create pod {name}", self.api.create_namespaced_pod, self.namespace, body, tolerate=(409,)
        )
        if not isinstance(result, Tolerated):
            return self.client.sanitize(result)
        existing = self.client.sanitize(
            self.client.call(f"read pod {name}", self.api.read_namespaced_pod, name, self.namespace)
        )
        if (existing.get("metadata") or {}).get("deletionTimestamp"):
            raise TransientBackendError(f"pod {name} from an earlier attempt is still terminating")
        before = p.placement_from_pod(existing)
        if before is not None and (before.node, before.gpu_indices) != (
            placement.node,
            placement.gpu_indices,
        ):
            raise PlacementConflictError(
                f"pod {name} already exists on {before.node} GPUs {list(before.gpu_indices)}, "
                f"not on {placement.node} GPUs {list(placement.gpu_indices)}"
            )
        return existing

    def _bind_pod(self, pod: dict[str, Any], node: str) -> None:
        name = p.name_of(pod)
        if (pod.get("spec") or {}).get("nodeName"):
            return
        # _preload_content=False: the API answers a Status, which the client cannot read as a Binding.
        self.client.call(
            f"bind pod {name} to {node}",
            self.api.create_namespaced_pod_binding,
            name,
            (pod.get("metadata") or {}).get("namespace") or self.namespace,
            p.binding_body(name, node),
            tolerate=(409,),
            _preload_content=False,
        )

    def bind(self, spec: TaskSpec, placement: Placement) -> None:
        """Start one task. A single-task job is bound at once; a rank of a distributed job is bound
        together with the others when the last rank's pod exists (gang: all or none)."""
        if spec.world_size <= 1:
            self._check_capacity([placement])
            self.ensure_workspace_service(spec)  # a workspace's Service (docs/workspaces.md)
            self._bind_pod(self._create_pod(spec, placement), placement.node)
            return
        self._check_capacity([placement])
        self._ensure_service(spec.job_id)
        self._create_pod(spec, placement)
        members = self._job_pods(spec.job_id)
        ranks = {(pod["metadata"].get("annotations") or {}).get(c.ANN_RANK) for pod in members}
        if len(ranks) >= spec.world_size:
            self._bind_all(spec.job_id, members)

    def bind_job(self, specs: Sequence[TaskSpec], placements: Sequence[Placement]) -> None:
        """Start every task of a job, or none: all pods are created first, then all are bound; if a
        binding is refused for good, the job's pods and Service are deleted before the error is raised."""
        by_task = {placement.task_id: placement for placement in placements}
        missing = [spec.task_id for spec in specs if spec.task_id not in by_task]
        if missing:
            raise PermanentBackendError(f"no placement for tasks {missing}")
        if not specs:
            return
        job_id = specs[0].job_id
        self._check_capacity([by_task[spec.task_id] for spec in specs])
        if len(specs) > 1 or specs[0].world_size > 1:
            self._ensure_service(job_id)
        self.ensure_workspace_service(specs[0])
        created = [self._create_pod(spec, by_task[spec.task_id]) for spec in specs]
        self._bind_all(job_id, created)

    def _bind_all(self, job_id: str, members: list[dict[str, Any]]) -> None:
        try:
            for pod in sorted(members, key=p.name_of):
                placement = p.placement_from_pod(pod)
                if placement is None:
                    raise PermanentBackendError(f"pod {p.name_of(pod)} carries no placement annotation")
                self._bind_pod(pod, placement.node)
        except PermanentBackendError:
            self.delete_job(job_id)
            raise

    def _job_pods(self, job_id: str) -> list[dict[str, Any]]:
        result = self.client.call(
            f"list pods of job {job_id}",
            self.api.list_namespaced_pod,
            self.namespace,
            label_selector=p.job_selector(job_id),
        )
        pods = [self.client.sanitize(item) for item in result.items]
        return [pod for pod in pods if p.job_id_of(pod) == job_id and p.is_ours(pod)]

    # ------------------------------------------------------------------ status (watch)

    def relist(self) -> None:
        """Replace the pod cache with a fresh list (see watch.PodWatch)."""
        self.watch.relist()

    def refresh(self, timeout_s: float | None = None) -> None:
        """Bring the pod cache up to date (see watch.PodWatch.refresh)."""
        self.watch.refresh(timeout_s)

    @property
    def relists(self) -> int:
        return self.watch.relists

    def task_statuses(self, job_id: str | None = None) -> list[TaskStatus]:
        """Every task of ours (or of ``job_id``): live pods from the watched cache, plus pods that
        vanished without our asking (FAILED, PLATFORM)."""
        self.refresh()
        statuses = self.watch.statuses()
        if job_id is not None:
            statuses = [s for s in statuses if s.job_id == job_id]
        for status in statuses:
            if status.phase is TaskPhase.RUNNING:
                status.throughput = self._reported_throughput(status)
        if job_id is None:
            self._throughput = {k: v for k, v in self._throughput.items() if k in self.watch.pods}
        return sorted(statuses, key=lambda s: (s.job_id, s.task_id))

    def _reported_throughput(self, status: TaskStatus) -> float | None:
        """The throughput contract's log line (scheduler.backends.throughput), from the end of the
        pod's log: a pod has no file the platform can read, so the line is how it reports."""
        name = c.pod_name(status.job_id, status.task_id)
        read_at, value = self._throughput.get(name, (float("-inf"), None))
        now = self.clock()
        if now - read_at < self.throughput_interval_s:
            return value
        try:
            fresh = parse_log(self._log_tail(name, self.throughput_tail_lines))
        except (TransientBackendError, PermanentBackendError):
            # Progress is a hint: a log the API cannot serve now must not fail the status sync.
            log.info("could not read the log of pod %s for its throughput", name, exc_info=True)
            fresh = None
        value = fresh if fresh is not None else value
        self._throughput[name] = (now, value)
        return value

    # ------------------------------------------------------------------ delete, logs

    def delete_job(self, job_id: str) -> None:
        """Delete the job's pods and its Service; idempotent (404 = already gone)."""
        names = {p.name_of(pod) for pod in self._job_pods(job_id)}
        names |= {name for name, pod in self.watch.pods.items() if p.job_id_of(pod) == job_id}
        for name in sorted(names):
            self.watch.drop(name)
            self.client.call(
                f"delete pod {name}",
                self.api.delete_namespaced_pod,
                name,
                self.namespace,
                grace_period_seconds=self.delete_grace_period_s,
                tolerate=(404,),
            )
        self.client.call(
            f"delete service {c.service_name(job_id)}",
            self.api.delete_namespaced_service,
            c.service_name(job_id),
            self.namespace,
            tolerate=(404,),
        )
        self.delete_workspace_service(job_id)
        self.watch.lost = {name: s for name, s in self.watch.lost.items() if s.job_id != job_id}

    def preempt_job(self, job_id: str, grace_seconds: float) -> None:
        """Delete the job's live pods with ``gracePeriodSeconds`` (SIGTERM, grace, SIGKILL by the
        kubelet) after marking them preempted; idempotent, returns without waiting (see the module
        docstring). Finished pods and pods already terminating are left as they are."""
        grace = p.grace_period(grace_seconds)
        for pod in self._job_pods(job_id):
            meta = pod.get("metadata") or {}
            if p.is_finished(pod) or meta.get("deletionTimestamp"):
                continue
            name = p.name_of(pod)
            patched = self.client.call(
                f"mark pod {name} preempted",
                self.api.patch_namespaced_pod,
                name,
                self.namespace,
                {"metadata": {"annotations": {c.ANN_PREEMPTED: str(grace)}}},
                tolerate=(404,),
            )
            if isinstance(patched, Tolerated):
                continue  # gone meanwhile: nothing left to stop
            # Cached with its mark, so the pod's disappearance reads as preempted, not lost.
            self.watch.pods[name] = self.client.sanitize(patched)
            self.client.call(
                f"delete pod {name}",
                self.api.delete_namespaced_pod,
                name,
                self.namespace,
                grace_period_seconds=grace,
                tolerate=(404,),
            )

    def logs(self, job_id: str, task_id: str) -> str:
        """The task's output so far (the last ``log_tail_lines`` lines); "" before it starts or after
        its pod is gone."""
        return self._log_tail(c.pod_name(job_id, task_id), self.log_tail_lines)

    def _log_tail(self, name: str, lines: int) -> str:
        result = self.client.call(
            f"read log of pod {name}",
            self.api.read_namespaced_pod_log,
            name,
            self.namespace,
            container=p.CONTAINER,
            tail_lines=lines,
            tolerate=(400, 404),
            # Raw bytes: servers label logs text/plain or octet-stream, and the client only decodes some.
            _preload_content=False,
        )
        if isinstance(result, Tolerated):
            return ""
        return bytes(result.data).decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ outside pods

    def _pending_outside_pods(self) -> list[dict[str, Any]]:
        if self.cluster_scope:
            result = self.client.call(
                "list pending pods in all namespaces",
                self.api.list_pod_for_all_namespaces,
                field_selector=f"spec.schedulerName={self.scheduler_name},status.phase=Pending,spec.nodeName=",
            )
        else:
            result = self.client.call(
                f"list pending pods in {self.namespace}",
                self.api.list_namespaced_pod,
                self.namespace,
                field_selector=f"spec.schedulerName={self.scheduler_name},status.phase=Pending,spec.nodeName=",
            )
        pods = []
        for pod in (self.client.sanitize(item) for item in result.items):
            spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
            if spec.get("schedulerName") != self.scheduler_name or spec.get("nodeName") or p.is_ours(pod):
                continue
            if (
                meta.get("deletionTimestamp")
                or (pod.get("status") or {}).get("phase", "Pending") != "Pending"
            ):
                continue
            pods.append(pod)
        return pods

    def outside_jobs(self) -> tuple[list[JobRequest], dict[str, str]]:
        """Pods created outside the platform (e.g. ``kubectl apply``) that name our schedulerName and
        wait for a node, as JobRequests for ``schedule()``; pods of one ``gpu-platform.io/gang`` form
        one job. Returns (jobs, {job_id: reason}) where the second lists pods whose annotations are
        invalid. Job ids are ``pod:<ns>/<name>`` or ``gang:<ns>/<gang>``."""
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for pod in self._pending_outside_pods():
            meta = pod["metadata"]
            gang = (meta.get("annotations") or {}).get(c.ANN_GANG)
            job_id = (
                f"gang:{meta.get('namespace')}/{gang}"
                if gang
                else f"pod:{meta.get('namespace')}/{meta.get('name')}"
            )
            groups[job_id].append(pod)
        jobs: list[JobRequest] = []
        invalid: dict[str, str] = {}
        for job_id, members in sorted(groups.items()):
            tasks = []
            for pod in sorted(members, key=p.name_of):
                task = p.outside_task(pod)
                if isinstance(task, str):
                    invalid[job_id] = task
                    break
                tasks.append(task)
            else:
                first = members[0]
                jobs.append(
                    JobRequest(
                        job_id=job_id,
                        tasks=tasks,
                        priority=int((first.get("spec") or {}).get("priority") or 0),
                        submitted_at=min(p.creation_key(pod)[0] for pod in members),
                        user=(first["metadata"].get("namespace") or ""),
                        hints={"source": "kubernetes"},
                    )
                )
        return jobs, invalid

    def bind_outside(self, placements: Sequence[Placement]) -> None:
        """Bind outside pods to their placements, each job all or none: every pod first gets the
        assignment annotations (their containers can read them through the downward API, see
        docs/kubernetes.md), then every pod is bound."""
        by_job: dict[str, list[Placement]] = defaultdict(list)
        for placement in placements:
            by_job[placement.job_id].append(placement)
        for job_id, members in by_job.items():
            annotated = []
            for placement in members:
                namespace, _, name = placement.task_id.partition("/")
                annotations = c.assignment_annotations(placement, self._node_uuids(placement.node))
                annotations.update({c.ANN_JOB_ID: job_id, c.ANN_TASK_ID: placement.task_id})
                result = self.client.call(
                    f"annotate pod {placement.task_id}",
                    self.api.patch_namespaced_pod,
                    name,
                    namespace,
                    {"metadata": {"annotations": annotations}},
                    tolerate=(404,),
                )
                if isinstance(result, Tolerated):
                    raise PermanentBackendError(
                        f"pod {placement.task_id} of {job_id} is gone; not binding the job"
                    )
                annotated.append((name, namespace, placement.node))
            for name, namespace, node in annotated:
                self._bind_pod({"metadata": {"name": name, "namespace": namespace}}, node)


def default_topology_builder() -> Callable[[dict[str, Any]], Any] | None:
    """``scheduler.topology.graph.Topology.from_dict`` when the topology package is installed: the
    agent publishes the link matrix in exactly that form."""
    try:
        from scheduler.topology.graph import Topology
    except ImportError:
        return None
    return Topology.from_dict


def _hold_device_plugin_gpus(node: Node, pod: dict[str, Any]) -> None:
    """A pod we did not place that took ``nvidia.com/gpu`` from the device plugin holds that many GPUs,
    but which ones only the kubelet knows: count them on idle GPUs, highest index first (the device
    plugin's usual order is lowest first, so this errs towards leaving low indices free), so that
    totals are right and no idle GPU is promised twice."""
    wanted = sum(
        int(((container.get("resources") or {}).get("limits") or {}).get(c.DEVICE_PLUGIN_RESOURCE) or 0)
        for container in (pod.get("spec") or {}).get("containers") or []
    )
    meta = pod.get("metadata") or {}
    for gpu in sorted((g for g in node.gpus if g.is_idle), key=lambda g: -g.index)[:wanted]:
        gpu.used_milli = GPU_MILLI
        gpu.used_memory_mib = gpu.memory_mib
        gpu.tenants.append(f"{meta.get('namespace', '')}/{meta.get('name', '')}")

"""Pod and Service bodies for tasks, and the way back: pod -> TaskStatus / Placement / TaskRequest.

Pure functions over JSON dicts (camelCase, as the API server speaks), so they are easy to test and the
backend stays a thin layer of API calls.
"""

from __future__ import annotations

import calendar
import dataclasses
import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any

from scheduler.backends.base import PREEMPTED_PREFIX, TaskPhase, TaskSpec, TaskStatus
from scheduler.backends.kubernetes import contract as c
from scheduler.backends.kubernetes.nodes import cpu_milli, memory_mib
from scheduler.model import GPU_MILLI, Placement, TaskRequest

CONTAINER = "main"
DEFAULT_MASTER_PORT = 29500
# Where the checkpoint volume is mounted: the folder the standard images keep for it (CHECKPOINT_DIR).
CHECKPOINT_MOUNT = "/checkpoints"
CHECKPOINT_VOLUME = "checkpoint"
CHECKPOINT_KINDS = ("pvc", "hostPath")


_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def parse_checkpoint_volume(value: str | None) -> tuple[str, str] | None:
    """``KUBERNETES_CHECKPOINT_VOLUME``: ``pvc:<claim>`` or ``hostPath:<absolute dir>``; empty means
    none (checkpoints then live in the container and do not survive a preemption). Raises ValueError
    with a one-line message for anything else."""
    if not value:
        return None
    kind, sep, target = value.partition(":")
    if not sep or kind not in CHECKPOINT_KINDS or not target.strip():
        raise ValueError(
            f"checkpoint volume {value!r} must be pvc:<claim name> or hostPath:<absolute folder>"
        )
    if kind == "hostPath" and not target.startswith("/"):
        raise ValueError(f"checkpoint volume {value!r}: a hostPath must be an absolute folder")
    if kind == "pvc" and not _SUBDOMAIN.fullmatch(target):
        raise ValueError(f"checkpoint volume {value!r}: {target!r} is not a valid claim name")
    return kind, target


# Waiting reasons that mean the image will not come (the kubelet would retry for ever).
IMAGE_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull"})
# Pod-level reasons of a failed pod that are the node's fault, not the user's.
HARDWARE_REASONS = frozenset({"NodeLost", "NodeShutdown", "UnexpectedAdmissionError", "NodeAffinity"})
PLATFORM_REASONS = frozenset({"Evicted", "Preempting", "Terminated", "Shutdown", "OutOfcpu", "OutOfmemory"})


@dataclass(frozen=True)
class PodOptions:
    """Cluster-wide choices for the pods the backend creates."""

    namespace: str
    scheduler_name: str
    # Extended resource asked for whole GPUs (e.g. "nvidia.com/gpu") when a device plugin must also
    # account them; None: the assignment travels by NVIDIA_VISIBLE_DEVICES alone (see docs/kubernetes.md).
    gpu_resource_name: str | None = None
    master_port: int = DEFAULT_MASTER_PORT
    run_as_user: int = 1000
    image_pull_secret: str | None = None
    # Host directory of the MPS control daemon's pipes, mounted into shared-GPU pods when set.
    mps_pipe_directory: str | None = None
    # (kind, target) from parse_checkpoint_volume: where CHECKPOINT_DIR lives across a job's runs.
    checkpoint_volume: tuple[str, str] | None = None


def job_labels(job_id: str) -> dict[str, str]:
    return {c.LABEL_MANAGED_BY: c.MANAGED_BY_VALUE, c.LABEL_JOB: c.label_value(job_id)}


def name_of(pod: dict[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name", ""))


def job_id_of(pod: dict[str, Any]) -> str:
    """The platform job a pod of ours belongs to ("" for any other pod)."""
    return str(((pod.get("metadata") or {}).get("annotations") or {}).get(c.ANN_JOB_ID, ""))


def is_ours(pod: dict[str, Any]) -> bool:
    """Whether the platform created the pod (our managed-by label), as opposed to an outside pod."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(c.LABEL_MANAGED_BY) == c.MANAGED_BY_VALUE


def creation_key(pod: dict[str, Any]) -> tuple[float, str]:
    """Oldest first, by name on ties: the order in which pods took their resources."""
    stamp = _timestamp((pod.get("metadata") or {}).get("creationTimestamp"))
    return (stamp or 0.0, name_of(pod))


def job_selector(job_id: str | None = None) -> str:
    selector = f"{c.LABEL_MANAGED_BY}={c.MANAGED_BY_VALUE}"
    if job_id is not None:
        selector += f",{c.LABEL_JOB}={c.label_value(job_id)}"
    return selector


def _resources(placement: Placement, options: PodOptions) -> dict[str, dict[str, str]]:
    requests: dict[str, str] = {}
    if placement.cpu_milli:
        requests["cpu"] = f"{placement.cpu_milli}m"
    if placement.memory_mib:
        requests["memory"] = f"{placement.memory_mib}Mi"
    # Limits equal requests: Guaranteed QoS, so co-located jobs cannot steal CPU or memory.
    limits = dict(requests)
    whole = len(placement.gpu_indices) if placement.gpu_milli in (0, GPU_MILLI) else 0
    if options.gpu_resource_name and whole:
        limits[options.gpu_resource_name] = str(whole)
        requests[options.gpu_resource_name] = str(whole)
    return {"requests": requests, "limits": limits}


def rank_hostname(rank: int) -> str:
    return f"rank-{rank}"


def distributed_env(spec: TaskSpec, options: PodOptions, local_rank: int = 0) -> dict[str, str]:
    """torch.distributed's rendezvous variables. Every rank's pod has hostname ``rank-<r>`` under the
    job's headless Service, so rank 0 is reachable at a name known before any pod exists. Each pod is
    one process that sees only its own GPUs, hence ``LOCAL_RANK`` 0 unless the caller says otherwise."""
    master = f"{rank_hostname(0)}.{c.service_name(spec.job_id)}.{options.namespace}.svc"
    return {
        "MASTER_ADDR": master,
        "MASTER_PORT": str(options.master_port),
        "WORLD_SIZE": str(spec.world_size),
        "RANK": str(spec.rank),
        "LOCAL_RANK": str(local_rank),
    }


def pod_body(
    spec: TaskSpec,
    placement: Placement,
    options: PodOptions,
    uuids: dict[int, str],
    local_rank: int = 0,
) -> dict[str, Any]:
    """The Pod of one task: our schedulerName (so only we bind it), labels to find it, annotations
    that record the assignment, the GPU environment, Guaranteed resources, a non-root sandbox."""
    name = c.pod_name(spec.job_id, spec.task_id)
    env: dict[str, str] = dict(spec.env)
    env.update(c.gpu_environment(placement, uuids))
    env.update({"GPU_PLATFORM_JOB_ID": spec.job_id, "GPU_PLATFORM_TASK_ID": spec.task_id})
    env.update(checkpoint_env(spec))
    annotations = {
        c.ANN_JOB_ID: spec.job_id,
        c.ANN_TASK_ID: spec.task_id,
        c.ANN_RANK: str(spec.rank),
        c.ANN_WORLD_SIZE: str(spec.world_size),
        c.ANN_TEAM: spec.team,
        c.ANN_USER: spec.user,
        c.ANN_RESUME: "true" if spec.resume else "false",
    }
    annotations.update(c.assignment_annotations(placement, uuids))
    pod_spec: dict[str, Any] = {
        "schedulerName": options.scheduler_name,
        "restartPolicy": "Never",
        # The kubelet's SIGTERM-to-SIGKILL window on delete: the job's time to write a checkpoint.
        "terminationGracePeriodSeconds": grace_period(spec.grace_seconds),
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": options.run_as_user,
            "runAsGroup": options.run_as_user,
            "fsGroup": options.run_as_user,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": CONTAINER,
                "image": spec.image,
                "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
                "resources": _resources(placement, options),
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
        # Tolerate the taint GPU node pools usually carry; placement is ours anyway.
        "tolerations": [{"key": c.DEVICE_PLUGIN_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
    }
    container = pod_spec["containers"][0]
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    if spec.max_runtime_s:
        pod_spec["activeDeadlineSeconds"] = int(spec.max_runtime_s)
    if options.image_pull_secret:
        pod_spec["imagePullSecrets"] = [{"name": options.image_pull_secret}]
    if options.mps_pipe_directory and 0 < placement.gpu_milli < GPU_MILLI:
        pod_spec.setdefault("volumes", []).append(
            {"name": "mps-pipe", "hostPath": {"path": options.mps_pipe_directory, "type": "Directory"}}
        )
        container.setdefault("volumeMounts", []).append(
            {"name": "mps-pipe", "mountPath": options.mps_pipe_directory}
        )
        container["env"].append({"name": "CUDA_MPS_PIPE_DIRECTORY", "value": options.mps_pipe_directory})
    if options.checkpoint_volume:
        volume, mount = checkpoint_volume(spec, options.checkpoint_volume)
        pod_spec.setdefault("volumes", []).append(volume)
        container.setdefault("volumeMounts", []).append(mount)
    if spec.world_size > 1:
        # hostname + subdomain give every rank a stable DNS name under the job's headless Service.
        pod_spec["hostname"] = rank_hostname(spec.rank)
        pod_spec["subdomain"] = c.service_name(spec.job_id)
        distributed = distributed_env(spec, options, local_rank)
        container["env"].extend({"name": k, "value": v} for k, v in sorted(distributed.items()))
        container["ports"] = [{"name": "rendezvous", "containerPort": options.master_port}]
    labels = job_labels(spec.job_id)
    labels[c.LABEL_TASK] = c.label_value(spec.task_id)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": options.namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": pod_spec,
    }


def grace_period(seconds: float) -> int:
    """Whole seconds for terminationGracePeriodSeconds / gracePeriodSeconds (the API takes integers;
    rounded up so a job never gets less than it was promised)."""
    return max(0, math.ceil(seconds))


def checkpoint_subpath(spec: TaskSpec) -> str:
    """The job's folder inside the checkpoint volume: ``spec.checkpoint_dir`` when the platform named
    one, else ``jobs/<job>``; the same for every rank and every run, so a resumed run finds it."""
    return spec.checkpoint_dir.strip("/") or f"jobs/{c.label_value(spec.job_id)}"


def checkpoint_env(spec: TaskSpec) -> dict[str, str]:
    env = {"CHECKPOINT_DIR": CHECKPOINT_MOUNT, "PREEMPTION_GRACE_SECONDS": f"{spec.grace_seconds:g}"}
    if spec.resume:
        env["RESUME"] = "1"
    return env


def checkpoint_volume(spec: TaskSpec, volume: tuple[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod volume, container mount) of the checkpoint volume, mounted with the job's sub-folder only:
    a job never sees another job's checkpoints."""
    kind, target = volume
    source: dict[str, Any] = (
        {"persistentVolumeClaim": {"claimName": target}}
        if kind == "pvc"
        else {"hostPath": {"path": target, "type": "DirectoryOrCreate"}}
    )
    mount = {"name": CHECKPOINT_VOLUME, "mountPath": CHECKPOINT_MOUNT, "subPath": checkpoint_subpath(spec)}
    return {"name": CHECKPOINT_VOLUME, **source}, mount


def preempted_status(pod: dict[str, Any], status: TaskStatus) -> TaskStatus:
    """A pod preempt_job deleted, once it has stopped (finished or gone): FAILED with no category and
    a message starting "preempted", whatever its container's exit code was."""
    grace = ((pod.get("metadata") or {}).get("annotations") or {}).get(c.ANN_PREEMPTED, "")
    status.phase = TaskPhase.FAILED
    status.failure_category = ""
    status.message = f"{PREEMPTED_PREFIX}: the pod was deleted with a grace period of {grace or '?'} s"
    return status


def is_preempted(pod: dict[str, Any]) -> bool:
    return c.ANN_PREEMPTED in ((pod.get("metadata") or {}).get("annotations") or {})


def service_body(job_id: str, options: PodOptions) -> dict[str, Any]:
    """Headless Service of a distributed job: DNS records for every rank, no load balancing."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": c.service_name(job_id),
            "namespace": options.namespace,
            "labels": job_labels(job_id),
            "annotations": {c.ANN_JOB_ID: job_id},
        },
        "spec": {
            "clusterIP": "None",
            # Ranks must resolve each other before they are Ready (rendezvous happens first).
            "publishNotReadyAddresses": True,
            "selector": job_labels(job_id),
            "ports": [{"name": "rendezvous", "port": options.master_port, "targetPort": options.master_port}],
        },
    }


def binding_body(pod: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def _timestamp(value: Any) -> float | None:
    if not value:
        return None
    try:
        return float(calendar.timegm(time.strptime(str(value)[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def _main_status(status: dict[str, Any]) -> dict[str, Any]:
    statuses = status.get("containerStatuses") or []
    for item in statuses:
        if item.get("name") == CONTAINER:
            return item
    return statuses[0] if statuses else {}


def _failure(pod_status: dict[str, Any], container: dict[str, Any]) -> tuple[str, int | None, str]:
    """(category, exit code, message) of a failed pod. Order matters: the pod-level reason names the
    platform's or node's fault before a container's exit code blames the user."""
    reason = pod_status.get("reason") or ""
    message = pod_status.get("message") or ""
    terminated = (container.get("state") or {}).get("terminated") or {}
    if not terminated:
        terminated = (container.get("lastState") or {}).get("terminated") or {}
    exit_code = terminated.get("exitCode")
    if reason == "DeadlineExceeded":
        return "TIMEOUT", exit_code, message or "the job ran past its maximum runtime"
    if reason in HARDWARE_REASONS:
        return "HARDWARE", exit_code, message or f"the node failed ({reason})"
    if reason in PLATFORM_REASONS:
        return "PLATFORM", exit_code, message or f"the platform stopped the pod ({reason})"
    if terminated.get("reason") == "OOMKilled":
        return "OOM", exit_code, "the task ran out of memory (OOMKilled)"
    detail = terminated.get("message") or terminated.get("reason") or message
    if exit_code is None:
        return "PLATFORM", None, detail or "the pod failed without an exit code"
    return "USER", exit_code, detail or f"the task exited with code {exit_code}"


def _disrupted(status: dict[str, Any]) -> str:
    """The DisruptionTarget condition's reason (eviction, preemption, taint manager), or ""."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            return str(condition.get("reason") or "Disrupted")
    return ""


def task_status(pod: dict[str, Any]) -> TaskStatus:
    """Map a pod to the backend's TaskStatus (phases and failure categories of DESIGN.md §5)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    annotations = meta.get("annotations") or {}
    placement = placement_from_pod(pod)
    container = _main_status(status)
    phase = status.get("phase") or "Pending"
    result = TaskStatus(
        job_id=annotations.get(c.ANN_JOB_ID, ""),
        task_id=annotations.get(c.ANN_TASK_ID, meta.get("name", "")),
        phase=TaskPhase.PENDING,
        node=spec.get("nodeName") or "",
        gpu_indices=placement.gpu_indices if placement else (),
        started_at=_timestamp(status.get("startTime")),
    )
    terminated = (container.get("state") or {}).get("terminated") or {}
    result.finished_at = _timestamp(terminated.get("finishedAt"))
    waiting = (container.get("state") or {}).get("waiting") or {}
    if phase == "Succeeded":
        result.phase = TaskPhase.SUCCEEDED
        result.exit_code = terminated.get("exitCode", 0)
    elif phase == "Failed":
        result.phase = TaskPhase.FAILED
        disrupted = _disrupted(status)
        category, result.exit_code, result.message = _failure(status, container)
        if disrupted and category in ("USER", "PLATFORM"):
            category, result.message = "PLATFORM", f"the pod was disrupted ({disrupted})"
        result.failure_category = category
    elif phase == "Unknown":
        # The kubelet stopped reporting: the node is lost, the task's fate with it.
        result.phase = TaskPhase.FAILED
        result.failure_category = "HARDWARE"
        result.message = status.get("message") or "lost contact with the node"
    elif waiting.get("reason") in IMAGE_REASONS:
        result.phase = TaskPhase.FAILED
        result.failure_category = "IMAGE"
        result.message = waiting.get("message") or f"the image could not be pulled ({waiting['reason']})"
    elif phase == "Running":
        result.phase = TaskPhase.RUNNING
    elif spec.get("nodeName"):
        result.phase = TaskPhase.STARTING
    if result.phase.finished and is_preempted(pod):
        return preempted_status(pod, result)
    return result


def placement_from_pod(pod: dict[str, Any]) -> Placement | None:
    """The Placement recorded on a pod's annotations, or None when it carries none (not ours)."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    raw = annotations.get(c.ANN_PLACEMENT)
    if raw:
        try:
            placement = Placement.from_dict(json.loads(raw))
            # The node the pod is bound to wins over the one it was planned for.
            bound = (pod.get("spec") or {}).get("nodeName")
            return dataclasses.replace(placement, node=str(bound)) if bound else placement
        except (ValueError, KeyError, TypeError):
            pass  # fall back to the individual annotations below
    if c.ANN_GPU_INDICES not in annotations or c.ANN_NODE not in annotations:
        return None
    try:
        indices = tuple(int(i) for i in annotations[c.ANN_GPU_INDICES].split(",") if i.strip())
        milli = int(annotations.get(c.ANN_GPU_MILLI) or 0)
        gpu_memory = int(annotations.get(c.ANN_GPU_MEMORY_MIB) or 0)
    except ValueError:
        return None
    cpu, memory = pod_requests(pod)
    return Placement(
        job_id=annotations.get(c.ANN_JOB_ID, ""),
        task_id=annotations.get(c.ANN_TASK_ID, meta.get("name", "")),
        node=(pod.get("spec") or {}).get("nodeName") or annotations[c.ANN_NODE],
        gpu_indices=indices,
        gpu_milli=milli,
        gpu_memory_mib=gpu_memory,
        cpu_milli=cpu,
        memory_mib=memory,
    )


def pod_requests(pod: dict[str, Any]) -> tuple[int, int]:
    """(CPU milli-cores, memory MiB) the pod's containers request, as the kube-scheduler counts them:
    the sum over containers, or the largest init container if that is bigger."""
    spec = pod.get("spec") or {}

    def total(containers: list[dict[str, Any]], key: str, parse: Any) -> list[int]:
        return [parse(((ct.get("resources") or {}).get("requests") or {}).get(key)) for ct in containers]

    containers = spec.get("containers") or []
    inits = spec.get("initContainers") or []
    cpu = max([sum(total(containers, "cpu", cpu_milli)), *total(inits, "cpu", cpu_milli)])
    memory = max([sum(total(containers, "memory", memory_mib)), *total(inits, "memory", memory_mib)])
    return cpu, memory


def is_finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def outside_task(pod: dict[str, Any]) -> TaskRequest | str:
    """The TaskRequest of a pod created outside the platform (kubectl) that names our scheduler, from
    our annotations (``gpu-platform.io/gpus`` | ``gpu-milli`` [+ ``gpu-memory-mib``]), KAI's
    (``gpu-fraction`` [+ ``gpu-memory``]) or a ``nvidia.com/gpu`` limit. A string says why the pod
    cannot be scheduled (shown to its owner as an event reason)."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    cpu, memory = pod_requests(pod)
    task_id = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    try:
        gpus = int(annotations.get(c.ANN_GPUS) or 0)
        milli = int(annotations.get(c.ANN_GPU_MILLI) or 0)
        gpu_memory = int(annotations.get(c.ANN_GPU_MEMORY_MIB) or annotations.get(c.KAI_GPU_MEMORY) or 0)
        if not milli and annotations.get(c.KAI_GPU_FRACTION):
            milli = round(float(annotations[c.KAI_GPU_FRACTION]) * GPU_MILLI)
        if not gpus and not milli:
            for container in (pod.get("spec") or {}).get("containers") or []:
                limits = (container.get("resources") or {}).get("limits") or {}
                gpus += int(limits.get(c.DEVICE_PLUGIN_RESOURCE) or 0)
    except ValueError as exc:
        return f"invalid GPU annotation on pod {task_id}: {exc}"
    if milli >= GPU_MILLI and milli % GPU_MILLI == 0 and not gpus:
        gpus, milli = milli // GPU_MILLI, 0
    if gpus < 0 or milli < 0 or gpu_memory < 0:
        return f"negative GPU request on pod {task_id}"
    if gpus and milli:
        return f"pod {task_id} asks for both whole GPUs and a GPU share; ask for one"
    if milli >= GPU_MILLI:
        return f"pod {task_id}: a GPU share must be below 1000 milli-GPU (1.0 GPU); ask for whole GPUs"
    return TaskRequest(
        task_id=task_id,
        cpu_milli=cpu,
        memory_mib=memory,
        gpus=gpus,
        gpu_milli=milli,
        gpu_memory_mib=gpu_memory if milli else 0,
    )

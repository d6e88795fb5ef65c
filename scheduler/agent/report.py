"""``python -m scheduler.agent report``: profile the platform's jobs that run alone on this node's GPUs.

Every ``--interval`` seconds the loop asks its source which platform tasks run on this node
(``solo_runs``: Kubernetes pods of the platform on the node, each with its one GPU index, image and
command) and keeps those alone on their GPU (no other platform task on it). For each it reads one NVML
sample of that GPU (``profiling.read_sample``) at ``t`` = seconds since the loop first saw the run,
with the throughput the job last wrote to its throughput file when the agent can see that file.
Once a run's samples span ``--profile-seconds`` past the warm-up, they are posted to the platform
(``publish.post_solo_profile``: ``POST /api/v1/agent/solo-profiles/`` with the node token), which
records them as the configuration's ``SoloProfile``; a run is posted once. A run that stops being
alone (a co-tenant arrived) or ends before its window is dropped: its samples would mix tenants.

A post the platform refuses or never receives is logged in one line and retried next period with
the same samples, so a platform restart loses nothing. Pure library over injected NVML, source and
HTTP client, so tests drive it with recorded samples and a real endpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from scheduler.agent.profiling import Sample, read_reported_throughput, read_sample
from scheduler.agent.publish import PublishError, post_solo_profile, solo_profile_body
from scheduler.backends.kubernetes import contract as c

log = logging.getLogger("scheduler.agent.report")


@dataclass(frozen=True)
class Run:
    """One platform task on this node: its id, its GPU (one index), its image and command line."""

    task_id: str
    gpu_index: int
    image: str
    command: str
    # The job's throughput file as this agent sees it (the throughput contract), "" when not visible.
    throughput_file: str = ""


@dataclass
class _Progress:
    first_seen: float
    samples: list[Sample] = field(default_factory=list)


def alone(runs: Iterable[Run]) -> list[Run]:
    """The runs no other run shares a GPU with."""
    listed = list(runs)
    count: dict[int, int] = {}
    for run in listed:
        count[run.gpu_index] = count.get(run.gpu_index, 0) + 1
    return [r for r in listed if count[r.gpu_index] == 1]


def runs_from_pods(pods: Iterable[Any]) -> list[Run]:
    """Runs of the platform's running pods (``kubernetes.client.V1Pod``): one GPU index each, from
    the placement annotation; pods on several GPUs or none are not solo-profiled."""
    import shlex

    out: list[Run] = []
    for pod in pods:
        meta, spec = pod.metadata, pod.spec
        annotations = meta.annotations or {}
        indices = [i for i in str(annotations.get(c.ANN_GPU_INDICES, "")).split(",") if i.strip()]
        if getattr(pod.status, "phase", "") != "Running" or len(indices) != 1 or not spec.containers:
            continue
        container = spec.containers[0]
        line = shlex.join([*(container.command or []), *(container.args or [])])
        task_id = str(annotations.get(c.ANN_TASK_ID, meta.name))
        out.append(Run(task_id=task_id, gpu_index=int(indices[0]), image=str(container.image), command=line))
    return out


class ReportLoop:
    """The agent's solo-profile reporting (module docstring); ``step`` is one period."""

    def __init__(
        self,
        *,
        nvml: Any,
        source: Callable[[], Iterable[Run]],
        url: str,
        token: str,
        profile_s: float = 60.0,
        warmup_s: float = 10.0,
        client: httpx.Client | None = None,
    ) -> None:
        if profile_s <= 0 or warmup_s < 0:
            raise ValueError("the profile window must be positive and the warm-up not negative")
        self.nvml, self.source, self.url, self.token = nvml, source, url, token
        self.profile_s, self.warmup_s, self.client = profile_s, warmup_s, client
        self.progress: dict[str, _Progress] = {}
        self.posted: set[str] = set()

    def _gpu_model(self, index: int) -> str:
        name = self.nvml.nvmlDeviceGetName(self.nvml.nvmlDeviceGetHandleByIndex(index))
        return name.decode() if isinstance(name, bytes) else str(name)

    def step(self, now: float) -> list[dict[str, Any]]:
        """Sample every run alone on its GPU; post the runs whose window is full. Returns the
        profiles the platform stored in this period."""
        current = {r.task_id: r for r in alone(self.source()) if r.task_id not in self.posted}
        for gone in set(self.progress) - set(current):
            del self.progress[gone]
        stored: list[dict[str, Any]] = []
        for task_id, run in sorted(current.items()):
            progress = self.progress.setdefault(task_id, _Progress(first_seen=now))
            sample = read_sample(self.nvml, run.gpu_index, now - progress.first_seen)
            if run.throughput_file:
                sample.throughput = read_reported_throughput(Path(run.throughput_file))
            progress.samples.append(sample)
            first = progress.samples[0].t
            if progress.samples[-1].t - max(self.warmup_s, first) < self.profile_s:
                continue
            body = solo_profile_body(
                image=run.image,
                command=run.command,
                gpu_model=self._gpu_model(run.gpu_index),
                samples=progress.samples,
                warmup_s=self.warmup_s,
            )
            try:
                stored.append(post_solo_profile(self.url, self.token, body, client=self.client))
            except PublishError as exc:
                log.warning("solo profile of %s not stored: %s", task_id, exc)
                continue
            log.info("solo profile of %s stored (%d samples)", task_id, len(progress.samples))
            self.posted.add(task_id)
            del self.progress[task_id]
        return stored


def pod_source(api: Any, node_name: str) -> Callable[[], list[Run]]:
    """The platform's pods on ``node_name`` through ``api`` (a ``CoreV1Api``)."""

    def runs() -> list[Run]:
        pods = api.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={node_name}",
            label_selector=f"{c.LABEL_MANAGED_BY}={c.MANAGED_BY_VALUE}",
        )
        return runs_from_pods(pods.items)

    return runs

"""The checkpoint contract on the Kubernetes backend (kmock over real HTTP, official client unmodified):
every pod mounts its job's folder of the checkpoint volume at CHECKPOINT_DIR, carries the grace period
as terminationGracePeriodSeconds, and preempt_job deletes it with that grace; a resumed run gets
RESUME=1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kmock
import pytest

from scheduler.backends.base import PermanentBackendError, TaskPhase, TaskSpec
from scheduler.backends.kubernetes import KubernetesBackend
from scheduler.backends.kubernetes import contract as c
from scheduler.model import Placement
from tests.scheduler.backends.kube_emulator import (
    PODS,
    Emulator,
    add_node,
    running_emulator,
    serve_bindings,
    stored,
)

NS = "gpu-jobs"
SCHED = "gpu-platform-scheduler"
GPUS = json.dumps(
    [{"index": i, "uuid": f"GPU-{i:04d}", "model": "A100-SXM4-80GB", "memory_mib": 81920} for i in range(4)]
)


@pytest.fixture()
def emu() -> Iterator[Emulator]:
    with running_emulator() as emulator:
        add_node(emulator, "gpu-1", annotations={c.NODE_ANN_GPUS: GPUS})
        serve_bindings(emulator)
        yield emulator


def make_backend(emu: Emulator, **options: Any) -> KubernetesBackend:
    return KubernetesBackend(
        emu.api_client(),
        namespace=NS,
        scheduler_name=SCHED,
        sleep=lambda s: None,
        watch_timeout_s=0.2,
        **options,
    )


def task(job: str = "j1", rank: int = 0, world: int = 1, **kwargs: Any) -> tuple[TaskSpec, Placement]:
    spec = TaskSpec(
        job_id=job,
        task_id=f"{job}-{rank}",
        rank=rank,
        world_size=world,
        image="gpu-platform/pytorch:2.4",
        command=["python", "train.py"],
        **kwargs,
    )
    return spec, Placement(job, f"{job}-{rank}", "gpu-1", (rank,), cpu_milli=1000, memory_mib=1024)


def pod_of(emu: Emulator, job: str = "j1", rank: int = 0) -> dict[str, Any]:
    return stored(emu, PODS, NS, c.pod_name(job, f"{job}-{rank}"))


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}


def record_deletes(emu: Emulator) -> list[tuple[str, dict[str, Any]]]:
    """Every pod DELETE the API server receives: (pod, its query parameters and body), then the
    emulator deletes it as usual."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def record(request: kmock.Request) -> Any:
        seen.append((str(request.name), {**dict(request.params or {}), **dict(request.data or {})}))
        raise kmock.ReactionMismatchError

    emu.handler["delete", PODS] << record
    return seen


def test_a_pods_first_run_gets_checkpoint_dir_and_grace_but_no_resume(emu: Emulator) -> None:
    backend = make_backend(emu)
    backend.bind(*task(grace_seconds=42.5))

    pod = pod_of(emu)
    env = env_of(pod)
    assert env["CHECKPOINT_DIR"] == "/checkpoints"
    assert env["PREEMPTION_GRACE_SECONDS"] == "42.5"
    assert "RESUME" not in env
    assert pod["spec"]["terminationGracePeriodSeconds"] == 43  # rounded up, never less than promised
    assert "volumes" not in pod["spec"]  # no checkpoint volume configured: the image's own folder


def test_with_a_pvc_every_rank_and_every_run_mounts_the_same_job_folder_of_the_claim(emu: Emulator) -> None:
    backend = make_backend(emu, checkpoint_volume="pvc:team-checkpoints")
    backend.bind_job(*zip(*(task(rank=r, world=2) for r in range(2)), strict=True))

    for rank in (0, 1):
        spec = pod_of(emu, rank=rank)["spec"]
        assert spec["volumes"] == [
            {"name": "checkpoint", "persistentVolumeClaim": {"claimName": "team-checkpoints"}}
        ]
        assert spec["containers"][0]["volumeMounts"] == [
            {"name": "checkpoint", "mountPath": "/checkpoints", "subPath": "jobs/j1"}
        ]
    other = make_backend(emu, checkpoint_volume="pvc:team-checkpoints")
    other.bind(*task(job="j2"))
    assert pod_of(emu, job="j2")["spec"]["containers"][0]["volumeMounts"][0]["subPath"] == "jobs/j2"


def test_with_a_host_path_the_job_folder_is_created_on_the_node(emu: Emulator) -> None:
    backend = make_backend(emu, checkpoint_volume="hostPath:/data/checkpoints")
    backend.bind(*task())

    spec = pod_of(emu)["spec"]
    assert spec["volumes"] == [
        {"name": "checkpoint", "hostPath": {"path": "/data/checkpoints", "type": "DirectoryOrCreate"}}
    ]
    assert spec["containers"][0]["volumeMounts"][0]["subPath"] == "jobs/j1"


@pytest.mark.parametrize(
    "value", ["nfs:server", "pvc:", "pvc:Bad_Claim", "hostPath:relative/dir", "claim-without-kind"]
)
def test_a_malformed_checkpoint_volume_is_refused_in_one_line(emu: Emulator, value: str) -> None:
    with pytest.raises(PermanentBackendError) as refused:
        make_backend(emu, checkpoint_volume=value)

    assert "KUBERNETES_CHECKPOINT_VOLUME" in str(refused.value) and "\n" not in str(refused.value)


def test_preempt_job_deletes_the_pods_with_the_grace_period_and_reports_them_preempted(emu: Emulator) -> None:
    deletes = record_deletes(emu)
    now = [1000.0]
    # kmock sends no DELETED watch event: the pod's end is seen at the next resync, as after a
    # broken watch on a real API server.
    backend = make_backend(emu, checkpoint_volume="pvc:ckpt", resync_s=60, clock=lambda: now[0])
    backend.bind(*task())
    name = c.pod_name("j1", "j1-0")
    assert [s.phase for s in backend.task_statuses("j1")] == [TaskPhase.STARTING]

    backend.preempt_job("j1", grace_seconds=12.2)

    assert [(pod, str(args.get("gracePeriodSeconds"))) for pod, args in deletes] == [(name, "13")]
    now[0] += 61
    [status] = backend.task_statuses("j1")
    assert (status.phase, status.failure_category) == (TaskPhase.FAILED, "")
    assert status.message.startswith("preempted") and "13 s" in status.message


def test_the_run_after_a_preemption_is_a_new_pod_with_resume_and_the_same_checkpoint_folder(
    emu: Emulator,
) -> None:
    backend = make_backend(emu, checkpoint_volume="pvc:ckpt")
    backend.bind(*task())
    backend.preempt_job("j1", grace_seconds=5)

    backend.bind(*task(resume=True))

    pod = pod_of(emu)
    assert env_of(pod)["RESUME"] == "1"
    assert pod["metadata"]["annotations"][c.ANN_RESUME] == "true"
    assert c.ANN_PREEMPTED not in pod["metadata"]["annotations"]
    assert pod["spec"]["containers"][0]["volumeMounts"][0]["subPath"] == "jobs/j1"


def test_preempting_a_finished_pod_or_an_unknown_job_deletes_nothing(emu: Emulator) -> None:
    deletes = record_deletes(emu)
    backend = make_backend(emu)
    backend.bind(*task())
    emu.handler.objects[PODS, NS, c.pod_name("j1", "j1-0")].patch({"status": {"phase": "Succeeded"}})

    backend.preempt_job("j1", grace_seconds=5)
    backend.preempt_job("nope", grace_seconds=5)

    assert deletes == []
    assert [s.phase for s in backend.task_statuses("j1")] == [TaskPhase.SUCCEEDED]

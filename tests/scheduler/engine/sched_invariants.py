"""Helpers shared by the scheduler core tests: building clusters and checking decision invariants."""

from __future__ import annotations

from collections import defaultdict

from scheduler.model import (
    GPU_MILLI,
    ClusterSnapshot,
    Decision,
    Gpu,
    JobRequest,
    Node,
    Placement,
    TaskRequest,
    reserve,
)


def make_node(
    name: str,
    cpu: int = 16_000,
    mem: int = 64_000,
    gpus: int = 0,
    model: str = "T4",
    gpu_mem: int = 16_000,
    schedulable: bool = True,
) -> Node:
    return Node(
        name=name,
        cpu_milli=cpu,
        memory_mib=mem,
        schedulable=schedulable,
        gpus=[Gpu(index=i, model=model, memory_mib=gpu_mem) for i in range(gpus)],
    )


def make_snapshot(nodes: list[Node], running: list[Placement] = ()) -> ClusterSnapshot:  # type: ignore[assignment]
    """Nodes with the running placements already accounted in their usage."""
    by_name = {n.name: n for n in nodes}
    for p in running:
        reserve(by_name[p.node], p)
    return ClusterSnapshot(nodes=nodes, running=list(running))


def running(
    task_id: str,
    node: str,
    gpus: tuple[int, ...] = (),
    milli: int = 0,
    gpu_mem: int = 0,
    cpu: int = 0,
    mem: int = 0,
) -> Placement:
    return Placement(
        job_id=f"job-{task_id}",
        task_id=task_id,
        node=node,
        gpu_indices=gpus,
        gpu_milli=milli,
        gpu_memory_mib=gpu_mem,
        cpu_milli=cpu,
        memory_mib=mem,
    )


def job(job_id: str, *tasks: TaskRequest) -> JobRequest:
    return JobRequest(job_id=job_id, tasks=list(tasks))


def check_invariants(snapshot: ClusterSnapshot, pending: list[JobRequest], decision: Decision) -> None:
    """No GPU above 1000 milli or its memory, no node above CPU/memory, gangs all-or-nothing,
    whole-GPU tasks on distinct idle GPUs, placements match their requests."""
    after = snapshot.copy()
    nodes = {n.name: n for n in after.nodes}
    tasks = {t.task_id: t for j in pending for t in j.tasks}
    per_job: dict[str, int] = defaultdict(int)
    for p in decision.placements:
        node = nodes[p.node]
        assert node.schedulable, f"{p.task_id} placed on unschedulable {p.node}"
        task = tasks[p.task_id]
        per_job[p.job_id] += 1
        assert p.cpu_milli == task.cpu_milli and p.memory_mib == task.memory_mib
        assert len(set(p.gpu_indices)) == len(p.gpu_indices), "a GPU used twice by one task"
        if task.gpus:
            assert len(p.gpu_indices) == task.gpus and p.gpu_milli == GPU_MILLI
            for i in p.gpu_indices:
                assert node.gpus[i].is_idle, f"whole GPU {p.node}/{i} was not idle"
        elif task.gpu_milli:
            # A whole-GPU profile (k8s_default) may satisfy a share with a whole GPU.
            assert len(p.gpu_indices) == 1 and p.gpu_milli in (task.gpu_milli, GPU_MILLI)
        else:
            assert p.gpu_indices == ()
        if task.gpu_models and p.gpu_indices:
            assert node.gpu_model in task.gpu_models
        reserve(node, p)
    for node in after.nodes:
        assert 0 <= node.used_cpu_milli <= node.cpu_milli, f"{node.name} CPU over capacity"
        assert 0 <= node.used_memory_mib <= node.memory_mib, f"{node.name} memory over capacity"
        for gpu in node.gpus:
            assert 0 <= gpu.used_milli <= GPU_MILLI, f"{node.name}/{gpu.index} over 1000 milli-GPU"
            assert 0 <= gpu.used_memory_mib <= gpu.memory_mib, f"{node.name}/{gpu.index} over GPU memory"
    for j in pending:
        placed = per_job.get(j.job_id, 0)
        assert placed in (0, len(j.tasks)), f"gang {j.job_id} partly placed ({placed}/{len(j.tasks)})"
        assert (placed == 0) == (j.job_id in decision.unschedulable), (
            f"{j.job_id} neither placed nor explained"
        )

"""Declarative scheduling scenarios: nodes, running, pending -> expected placements and reasons.

Every scenario is also checked against the invariants in ``sched_invariants.check_invariants``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from sched_invariants import check_invariants, job, make_node, make_snapshot, running

from scheduler.engine.schedule import schedule
from scheduler.frag.fragmentation import TargetWorkload
from scheduler.model import JobRequest, Node, Placement, TaskRequest
from scheduler.profiles import get_profile


@dataclass
class Scenario:
    name: str
    nodes: list[Node]
    pending: list[JobRequest]
    profile: str = "default"
    running: list[Placement] = field(default_factory=list)
    # task id -> (node, gpu indices)
    expect: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    # job id -> substring of the reason
    unschedulable: dict[str, str] = field(default_factory=dict)
    data: dict[str, object] = field(default_factory=dict)


def T(
    task_id: str,
    cpu: int = 1000,
    mem: int = 1000,
    gpus: int = 0,
    milli: int = 0,
    gpu_mem: int = 0,
    models: tuple[str, ...] = (),
) -> TaskRequest:
    return TaskRequest(
        task_id=task_id,
        cpu_milli=cpu,
        memory_mib=mem,
        gpus=gpus,
        gpu_milli=milli,
        gpu_memory_mib=gpu_mem,
        gpu_models=models,
    )


SCENARIOS = [
    Scenario(
        "a CPU-only task skips the node without enough CPU",
        nodes=[make_node("small", cpu=2000), make_node("big", cpu=32_000)],
        pending=[job("j1", T("t1", cpu=8000))],
        profile="first_fit",
        expect={"t1": ("big", ())},
    ),
    Scenario(
        "shared tasks fill one GPU up to 1000 milli-GPU, then use the next",
        nodes=[make_node("n1", gpus=2)],
        pending=[job("a", T("a", milli=600)), job("b", T("b", milli=400)), job("c", T("c", milli=300))],
        profile="first_fit",
        expect={"a": ("n1", (0,)), "b": ("n1", (0,)), "c": ("n1", (1,))},
    ),
    Scenario(
        "a GPU model constraint picks the matching node and explains a miss",
        nodes=[make_node("t4", gpus=2, model="T4"), make_node("v100", gpus=2, model="V100")],
        pending=[job("ok", T("ok", gpus=1, models=("V100",))), job("no", T("no", gpus=1, models=("A100",)))],
        profile="first_fit",
        expect={"ok": ("v100", (0,))},
        unschedulable={"no": "GPU model is not one of A100"},
    ),
    Scenario(
        "a whole-GPU task never lands on a partly used GPU",
        nodes=[make_node("n1", gpus=2)],
        running=[running("r", "n1", (0,), milli=100, gpu_mem=1000)],
        pending=[job("w", T("w", gpus=1))],
        profile="first_fit",
        expect={"w": ("n1", (1,))},
    ),
    Scenario(
        "a gang that does not fit entirely is not placed at all",
        nodes=[make_node("n1", gpus=4), make_node("n2", gpus=2)],
        pending=[job("gang", T("g0", gpus=4), T("g1", gpus=4)), job("after", T("after", gpus=2))],
        profile="first_fit",
        expect={"after": ("n1", (0, 1))},
        unschedulable={"gang": "fewer than 4 free whole GPU(s)"},
    ),
    Scenario(
        "best-fit GPU choice takes the fullest GPU that still fits",
        nodes=[make_node("n1", gpus=3)],
        running=[running("r0", "n1", (0,), milli=200), running("r1", "n1", (1,), milli=600)],
        pending=[job("s", T("s", milli=300))],
        profile="best_fit",
        expect={"s": ("n1", (1,))},
    ),
    Scenario(
        "equal scores break ties to the first node in snapshot order",
        nodes=[make_node("b-first"), make_node("a-second")],
        pending=[job("t", T("t", cpu=1000))],
        profile="gpu_packing",
        expect={"t": ("b-first", ())},
    ),
    Scenario(
        "GPU memory is a hard limit for shared tasks",
        nodes=[make_node("small-mem", gpus=1, gpu_mem=8_000), make_node("big-mem", gpus=1, gpu_mem=32_000)],
        pending=[job("m", T("m", milli=200, gpu_mem=12_000))],
        profile="first_fit",
        expect={"m": ("big-mem", (0,))},
    ),
    Scenario(
        "an unschedulable node takes nothing",
        nodes=[make_node("cordoned", schedulable=False), make_node("open", cpu=1000)],
        pending=[job("x", T("x", cpu=4000))],
        profile="first_fit",
        unschedulable={"x": "node is not schedulable"},
    ),
    Scenario(
        "DotProduct puts a task on the fullest node in the dimensions it uses",
        nodes=[make_node("empty", gpus=4), make_node("busy", gpus=4)],
        running=[running("r", "busy", (0, 1, 2), milli=1000, gpu_mem=16_000, cpu=8000)],
        pending=[job("d", T("d", gpus=1, cpu=4000))],
        profile="dot_product",
        expect={"d": ("busy", (3,))},
    ),
    Scenario(
        "GpuClustering keeps shared tasks with shared tasks",
        nodes=[make_node("whole", gpus=2), make_node("shared", gpus=2)],
        running=[
            running("w", "whole", (0,), milli=1000, gpu_mem=16_000),
            running("s", "shared", (0,), milli=300),
        ],
        pending=[job("n", T("n", milli=300))],
        profile="gpu_clustering",
        expect={"n": ("shared", (0,))},
    ),
    Scenario(
        "GpuPacking fills a partly used GPU before opening an idle node",
        nodes=[make_node("idle", gpus=2), make_node("partial", gpus=2)],
        running=[running("p", "partial", (1,), milli=500)],
        pending=[job("q", T("q", milli=400))],
        profile="gpu_packing",
        expect={"q": ("partial", (1,))},
    ),
    Scenario(
        "FGD keeps the idle GPU whole when whole-GPU work is expected",
        nodes=[make_node("n1", gpus=2)],
        running=[running("p", "n1", (1,), milli=500)],
        pending=[job("f", T("f", milli=500))],
        profile="fgd",
        expect={"f": ("n1", (1,))},
        data={
            "target_workload": TargetWorkload.from_tasks(
                [T(f"w{i}", gpus=1) for i in range(9)] + [T("s", milli=500)]
            )
        },
    ),
    Scenario(
        "Kubernetes default hands a shared request a whole GPU and spreads",
        nodes=[make_node("n1", gpus=2), make_node("n2", gpus=2)],
        pending=[job("k1", T("k1", milli=100)), job("k2", T("k2", milli=100))],
        profile="k8s_default",
        expect={"k1": ("n1", (0,)), "k2": ("n2", (0,))},
    ),
    Scenario(
        "the default profile packs a shared task onto a partly used GPU",
        nodes=[make_node(n, gpus=8, cpu=96_000, mem=384_000) for n in ("n1", "n2")],
        running=[running("p", "n2", (1,), milli=600, cpu=1000, mem=1000)],
        pending=[job("d", T("d", milli=400))],
        profile="default",
        expect={"d": ("n2", (1,))},
    ),
    Scenario(
        "the default profile explains a task that fits nowhere",
        nodes=[make_node("n1", gpus=1, cpu=4000)],
        pending=[job("big", T("big", gpus=1, cpu=8000))],
        profile="default",
        unschedulable={"big": "insufficient CPU"},
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(scenario: Scenario) -> None:
    snapshot = make_snapshot(scenario.nodes, scenario.running)
    before = snapshot.copy()
    decision = schedule(snapshot, scenario.pending, get_profile(scenario.profile), data=scenario.data)
    check_invariants(snapshot, scenario.pending, decision)
    assert snapshot == before, "schedule() must not modify its input snapshot"
    got = {p.task_id: (p.node, p.gpu_indices) for p in decision.placements}
    for task_id, where in scenario.expect.items():
        assert got.get(task_id) == where, f"{task_id}: expected {where}, got {got.get(task_id)}"
    for job_id, reason in scenario.unschedulable.items():
        assert reason in decision.unschedulable.get(job_id, ""), decision.unschedulable
    assert set(decision.unschedulable) == set(scenario.unschedulable)

"""Builders for simulator tests: hand-made job types, clusters and policies (no shared data needed)."""

from __future__ import annotations

from scheduler.framework import Profile
from scheduler.policy.registry import Policy
from scheduler.sim.cluster import ClusterSpec, NodeGroup
from scheduler.sim.engine import SimConfig, SimResult, Simulator
from scheduler.sim.perf import JobType, PerfModel
from scheduler.sim.trace import TraceJob

FIRST_FIT = Profile(name="t-first-fit", filters=("resource_fit",), scores={}, gpu_chooser="first_fit_gpus")


def two_type_perf(y_ab: float, y_ba: float) -> PerfModel:
    """Job types A (ResNet-18, batch 32) and B (LM, batch 20) with y(A|B)=y_ab, y(B|A)=y_ba."""
    a = JobType("ResNet-18 (batch size 32)", "ResNet-18", 32)
    b = JobType("LM (batch size 20)", "LM", 20)
    pairs = {
        (a.name, b.name): y_ab,
        (b.name, a.name): y_ba,
        (a.name, a.name): 0.6,
        (b.name, b.name): 0.6,
    }
    return PerfModel("v100", [a, b], {a.name: 10.0, b.name: 5.0}, pairs)


def cluster(
    nodes: int = 1, gpus: int = 1, memory_mib: int = 16384, links: dict[tuple[int, int], str] | None = None
) -> ClusterSpec:
    group = NodeGroup(
        count=nodes,
        gpus=gpus,
        gpu_model="V100",
        gpu_memory_mib=memory_mib,
        cpu_cores=8 * gpus,
        memory_gib=64 * gpus,
        links=links or {},
    )
    return ClusterSpec(name=f"test-{nodes}x{gpus}", gavel_gpu_type="v100", groups=[group])


def policy(order: str = "fifo", share: str = "none", preemptive: bool = False) -> Policy:
    return Policy(
        name=f"t-{order}-{share}", order=order, share=share, profile=FIRST_FIT, preemptive=preemptive
    )


def run(jobs: list[TraceJob], spec: ClusterSpec, pol: Policy, perf: PerfModel, **config: float) -> SimResult:
    cfg = SimConfig(cycle_s=0.0, **config)  # type: ignore[arg-type]
    return Simulator(jobs, spec, pol, perf, cfg).run()

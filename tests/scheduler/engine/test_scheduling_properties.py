"""Property tests: random clusters, running work and requests, for every built-in profile.

Invariants hold for every decision; batch (NumPy) plugin hooks agree with their per-node hooks; and
the engine's per-shape score cache changes nothing compared with scoring from scratch.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sched_invariants import check_invariants

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.placement import PlacementEngine
from scheduler.engine.schedule import schedule
from scheduler.framework import CycleState
from scheduler.model import ClusterSnapshot, Gpu, JobRequest, Node, TaskRequest
from scheduler.plugin_registry import create_plugin
from scheduler.plugins.resource_fit import ResourceFit
from scheduler.profiles import PROFILES, get_profile

MODELS = ("T4", "V100", "A100")


@st.composite
def clusters(draw: st.DrawFn) -> ClusterSnapshot:
    nodes = []
    for i in range(draw(st.integers(1, 5))):
        n_gpus = draw(st.sampled_from([0, 1, 2, 4, 8]))
        model = draw(st.sampled_from(MODELS))
        gpu_mem = draw(st.sampled_from([8_000, 16_000, 32_000]))
        gpus = []
        for g in range(n_gpus):
            used = draw(st.sampled_from([0, 0, 0, 100, 250, 500, 900, 1000]))
            used_mem = 0 if used == 0 else min(gpu_mem, draw(st.integers(0, gpu_mem)))
            gpus.append(
                Gpu(index=g, model=model, memory_mib=gpu_mem, used_milli=used, used_memory_mib=used_mem)
            )
        cpu = draw(st.sampled_from([4_000, 16_000, 64_000]))
        mem = draw(st.sampled_from([16_000, 64_000, 256_000]))
        nodes.append(
            Node(
                name=f"n{i}",
                cpu_milli=cpu,
                memory_mib=mem,
                gpus=gpus,
                used_cpu_milli=draw(st.integers(0, cpu)),
                used_memory_mib=draw(st.integers(0, mem)),
                schedulable=draw(st.booleans()) or i == 0,
            )
        )
    return ClusterSnapshot(nodes=nodes)


@st.composite
def tasks(draw: st.DrawFn, task_id: str) -> TaskRequest:
    kind = draw(st.sampled_from(["cpu", "shared", "whole"]))
    gpus = draw(st.sampled_from([1, 2, 4, 8])) if kind == "whole" else 0
    milli = draw(st.integers(1, 999)) if kind == "shared" else 0
    return TaskRequest(
        task_id=task_id,
        cpu_milli=draw(st.integers(0, 20_000)),
        memory_mib=draw(st.integers(0, 80_000)),
        gpus=gpus,
        gpu_milli=milli,
        gpu_memory_mib=draw(st.sampled_from([0, 0, 2_000, 12_000])) if kind == "shared" else 0,
        gpu_models=draw(st.sampled_from([(), (), ("T4",), ("V100", "A100")])),
    )


@st.composite
def queues(draw: st.DrawFn) -> list[JobRequest]:
    jobs = []
    for j in range(draw(st.integers(1, 6))):
        n = draw(st.integers(1, 3))
        jobs.append(JobRequest(job_id=f"j{j}", tasks=[draw(tasks(f"j{j}-t{t}")) for t in range(n)]))
    return jobs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=clusters(), pending=queues(), profile=st.sampled_from(sorted(PROFILES)))
def test_every_profile_keeps_the_invariants_on_random_clusters(
    snapshot: ClusterSnapshot, pending: list[JobRequest], profile: str
) -> None:
    before = snapshot.copy()
    decision = schedule(snapshot, pending, get_profile(profile))
    check_invariants(snapshot, pending, decision)
    assert snapshot == before


@settings(max_examples=60, deadline=None)
@given(snapshot=clusters(), task=tasks("t"))
def test_batch_resource_fit_agrees_with_the_per_node_filter(
    snapshot: ClusterSnapshot, task: TaskRequest
) -> None:
    arrays = ClusterArrays.from_snapshot(snapshot)
    state = CycleState(snapshot=snapshot, arrays=arrays)
    plugin = ResourceFit()
    batch = plugin.filter_rows(state, task, np.arange(arrays.n))
    single = [plugin.filter(state, task, node).ok for node in snapshot.nodes]
    assert list(batch) == single


@settings(max_examples=40, deadline=None)
@given(
    snapshot=clusters(),
    task=tasks("t"),
    name=st.sampled_from(
        [
            "dot_product",
            "gpu_clustering",
            "gpu_packing",
            "best_fit",
            "fgd",
            "k8s_spread",
            "balance",
        ]
    ),
)
def test_batch_scores_equal_per_node_scores(snapshot: ClusterSnapshot, task: TaskRequest, name: str) -> None:
    plugin = create_plugin(name)
    arrays = ClusterArrays.from_snapshot(snapshot)
    state = CycleState(snapshot=snapshot, arrays=arrays)
    fits = np.flatnonzero(ResourceFit().filter_rows(state, task, np.arange(arrays.n)))
    batch = plugin.score_rows(state, task, fits)
    single = [plugin.score(state, task, snapshot.nodes[r]) for r in fits]
    assert np.allclose(batch, single)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    snapshot=clusters(),
    pending=queues(),
    profile=st.sampled_from(["fgd", "best_fit", "gpu_packing", "default"]),
)
def test_the_score_cache_never_changes_a_decision(
    snapshot: ClusterSnapshot, pending: list[JobRequest], profile: str
) -> None:
    built = get_profile(profile).build()
    cached = schedule(snapshot, pending, built)
    # Reference: a fresh engine (empty cache) for every task, placing in the same order.
    working = snapshot.copy()
    pending_tasks = [t for j in pending for t in j.tasks]
    state = CycleState(
        snapshot=working, arrays=ClusterArrays.from_snapshot(working), data={"pending_tasks": pending_tasks}
    )
    fresh = []
    for job in pending:
        state.job = job
        placed = []
        for task in job.tasks:
            out = PlacementEngine(built, state, working.nodes).place(task)
            if out.placement is None:
                break
            PlacementEngine(built, state, working.nodes).commit(out.row, out.placement)
            placed.append((out.row, out.placement))
        if len(placed) < len(job.tasks):
            for row, p in reversed(placed):
                PlacementEngine(built, state, working.nodes).release(row, p)
        else:
            fresh.extend(p for _, p in placed)
    assert [(p.task_id, p.node, p.gpu_indices) for p in cached.placements] == [
        (p.task_id, p.node, p.gpu_indices) for p in fresh
    ]

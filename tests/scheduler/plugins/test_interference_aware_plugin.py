"""Scenarios for the InterferenceAware plugin: tolerance filter, throughput score, recorded prediction."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.engine.schedule import schedule
from scheduler.framework import Profile
from scheduler.interference.models import InterferenceModel
from scheduler.interference.store import save_model
from scheduler.model import ClusterSnapshot, Decision, Gpu, JobRequest, Node, Placement, TaskRequest
from scheduler.plugin_registry import create_plugin


def _profile(model_path: Path) -> Profile:
    return Profile(
        name="interference",
        filters=("resource_fit", "interference_aware"),
        scores={"interference_aware": 1.0},
        gpu_chooser="interference_aware",
        args={"interference_aware": {"model_path": str(model_path)}},
    )


def _cluster(
    gpus: int = 2, tenant_util: float = 90.0, tenant_tolerance: float | None = None, model: str = "Tesla V100"
) -> ClusterSnapshot:
    node = Node(
        name="n1",
        cpu_milli=32000,
        memory_mib=256000,
        gpus=[Gpu(index=i, model=model, memory_mib=16384) for i in range(gpus)],
    )
    node.gpus[0].used_milli = 500
    node.gpus[0].used_memory_mib = 4000
    node.gpus[0].tenants = ["run-0"]
    running = Placement(
        job_id="run", task_id="run-0", node="n1", gpu_indices=(0,), gpu_milli=500, gpu_memory_mib=4000
    )
    profile: dict[str, float | str] = {"gpu_util": tenant_util, "mem_util": 20.0}
    if tenant_tolerance is not None:
        profile["slowdown_tolerance"] = tenant_tolerance
    return ClusterSnapshot(nodes=[node], running=[running], task_profiles={"run-0": profile})


def _job(util: float, milli: int = 400, tolerance: float = 1.5, gpus: int = 0) -> JobRequest:
    task = TaskRequest(
        task_id="new-0", gpu_milli=0 if gpus else milli, gpu_memory_mib=0 if gpus else 2000, gpus=gpus
    )
    return JobRequest(
        job_id="new", tasks=[task], slowdown_tolerance=tolerance, profile={"gpu_util": util, "mem_util": 20.0}
    )


def _only(decision: Decision) -> Placement:
    assert len(decision.placements) == 1, decision.unschedulable
    return decision.placements[0]


def test_a_heavy_job_avoids_the_gpu_where_it_would_slow_down_beyond_its_tolerance(tmp_path: Path) -> None:
    placed = _only(schedule(_cluster(), [_job(util=85.0)], _profile(tmp_path / "none.joblib")))
    assert placed.gpu_indices == (1,)
    assert placed.predicted_slowdown == 1.0
    assert "alone on GPU" in placed.reason


def test_a_heavy_job_waits_when_every_gpu_would_slow_it_down_too_much(tmp_path: Path) -> None:
    decision = schedule(_cluster(gpus=1), [_job(util=85.0)], _profile(tmp_path / "none.joblib"))
    assert not decision.placements
    assert "interference: predicted slowdown" in decision.unschedulable["new"]
    assert "> tolerance 1.50x" in decision.unschedulable["new"]


def test_light_jobs_are_packed_and_the_prediction_is_recorded_with_its_source(tmp_path: Path) -> None:
    placed = _only(
        schedule(_cluster(tenant_util=20.0), [_job(util=20.0)], _profile(tmp_path / "none.joblib"))
    )
    assert placed.gpu_indices == (0,)
    assert placed.predicted_slowdown is not None and 1.0 < placed.predicted_slowdown < 1.5
    assert "analytic estimate" in placed.reason and "no trained model" in placed.reason


def test_a_running_job_with_a_tight_tolerance_is_protected(tmp_path: Path) -> None:
    cluster = _cluster(tenant_util=20.0, tenant_tolerance=1.05)
    placed = _only(schedule(cluster, [_job(util=20.0)], _profile(tmp_path / "none.joblib")))
    assert placed.gpu_indices == (1,)


def test_a_larger_tolerance_admits_what_a_smaller_one_refuses(tmp_path: Path) -> None:
    strict = schedule(_cluster(gpus=1), [_job(util=85.0, tolerance=1.2)], _profile(tmp_path / "none.joblib"))
    lenient_cluster = _cluster(gpus=1, tenant_tolerance=10.0)
    lenient = schedule(lenient_cluster, [_job(util=85.0, tolerance=10.0)], _profile(tmp_path / "none.joblib"))
    assert not strict.placements and len(lenient.placements) == 1


def test_jobs_placed_earlier_in_the_same_cycle_count_as_tenants(tmp_path: Path) -> None:
    cluster = _cluster(gpus=1, tenant_util=10.0)
    first = _job(util=60.0, milli=200)
    second = JobRequest(
        job_id="second",
        tasks=[TaskRequest(task_id="second-0", gpu_milli=200, gpu_memory_mib=1000)],
        profile={"gpu_util": 90.0, "mem_util": 50.0},
    )
    alone = schedule(cluster, [second], _profile(tmp_path / "none.joblib"))
    assert [p.job_id for p in alone.placements] == ["second"]
    decision = schedule(cluster, [first, second], _profile(tmp_path / "none.joblib"))
    assert [p.job_id for p in decision.placements] == ["new"]
    assert "second" in decision.unschedulable


def test_whole_gpu_tasks_are_not_affected(tmp_path: Path) -> None:
    placed = _only(schedule(_cluster(), [_job(util=99.0, gpus=1)], _profile(tmp_path / "none.joblib")))
    assert placed.gpu_indices == (1,) and placed.predicted_slowdown == 1.0


def test_a_trained_model_is_used_and_named_in_the_reason(
    tmp_path: Path, trained_model: InterferenceModel
) -> None:
    path = save_model(trained_model, tmp_path / "m.joblib")
    cluster = _cluster(tenant_util=30.0, model="NVIDIA GeForce RTX 3090")
    placed = _only(schedule(cluster, [_job(util=30.0)], _profile(path)))
    assert placed.predicted_slowdown is not None and placed.predicted_slowdown >= 1.0
    assert "gradient_boosting model on lucid" in placed.reason


def test_the_plugin_is_registered_by_name() -> None:
    plugin = create_plugin("interference_aware", {"use_model": False})
    assert plugin.name == "interference_aware"


@pytest.mark.parametrize("conservative", [True, False])
def test_the_conservative_check_is_never_more_permissive(tmp_path: Path, conservative: bool) -> None:
    profile = _profile(tmp_path / "none.joblib")
    profile.args["interference_aware"]["conservative"] = conservative
    decision = schedule(_cluster(gpus=1, tenant_util=45.0), [_job(util=45.0, tolerance=1.12)], profile)
    # analytic: both shares fit, slowdown = 1 + CONTENTION = 1.10 <= 1.12 either way
    assert len(decision.placements) == 1


def _shared_only_node() -> ClusterSnapshot:
    """One GPU with one resident known by id only: nobody has a measured profile (declared shares)."""
    node = Node(name="n1", cpu_milli=32000, memory_mib=256000, gpus=[Gpu(index=0, model="Tesla V100")])
    node.gpus[0].used_milli = 300
    node.gpus[0].tenants = ["other-0"]
    return ClusterSnapshot(nodes=[node])


def _small(job_id: str, tolerance: float, tasks: int = 1) -> JobRequest:
    parts = [TaskRequest(task_id=f"{job_id}-{k}", gpu_milli=100) for k in range(tasks)]
    return JobRequest(job_id=job_id, tasks=parts, slowdown_tolerance=tolerance)


def _by_table(decision: Decision, job_id: str) -> bool:
    """Whether the job's placement was judged by the per-count table of declared shares."""
    (placement,) = [p for p in decision.placements if p.job_id == job_id]
    return "declared GPU shares" in placement.reason


def test_a_tolerance_seen_earlier_in_the_cycle_turns_the_declared_share_table_off(tmp_path: Path) -> None:
    # The table assumes every resident has one tolerance. A one-task job's own tolerance is not a
    # resident's (the job is not beside itself); an earlier job's is, and so is a gang's own.
    profile = _profile(tmp_path / "none.joblib")
    queue = [_small("lenient", 2.0), _small("usual", 1.5)]
    decision = schedule(_shared_only_node(), queue, profile)
    assert _by_table(decision, "lenient")
    assert not _by_table(decision, "usual")
    same = schedule(_shared_only_node(), [_small("a", 1.5), _small("b", 1.5)], profile)
    assert _by_table(same, "a") and _by_table(same, "b")
    gang = schedule(_shared_only_node(), [_small("gang", 2.0, tasks=2)], profile)
    assert len(gang.placements) == 2
    assert not any("declared GPU shares" in p.reason for p in gang.placements)

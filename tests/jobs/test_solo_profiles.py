"""Solo profiles stored with a job's image and command, and how they reach the scheduler (issue 4)."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from threadpoolctl import threadpool_limits

from jobs import scheduling
from jobs.models import SoloProfile
from jobs.profiling_services import (
    as_job_profile,
    command_line,
    fill_running_task_profiles,
    solo_profile_for_job,
    solo_profile_record,
)
from scheduler import profiles
from scheduler.agent.profiling import Sample, job_key
from scheduler.framework import Profile
from scheduler.interference.models import InterferenceModel
from scheduler.interference.store import MODEL_DIR_ENV, save_model
from scheduler.model import ClusterSnapshot, Placement
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    researcher,
    sim,
    submit,
    team,
)
from tests.scheduler.interference.interference_helpers import synthetic_records

# A light job alone on a T4, one reading per second as the agent publishes them: the first two are
# warm-up (dropped with warmup_s=2), then SM ~30 %, memory controller ~10 %, 2.6 GB, ~400 samples/s.
RECORDED: list[dict[str, Any]] = [
    {"t": 0.0, "gpu_util": 2.0, "mem_util": 0.0, "memory_mib": 300.0, "throughput": None},
    {"t": 1.0, "gpu_util": 20.0, "mem_util": 5.0, "memory_mib": 1800.0, "throughput": 150.0},
    {"t": 2.0, "gpu_util": 30.0, "mem_util": 10.0, "memory_mib": 2600.0, "throughput": 400.0},
    {"t": 3.0, "gpu_util": 32.0, "mem_util": 11.0, "memory_mib": 2600.0, "throughput": 410.0},
    {"t": 4.0, "gpu_util": 28.0, "mem_util": 9.0, "memory_mib": 2650.0, "throughput": 390.0},
]


def cycle(sim: Any) -> scheduling.CycleResult:
    result = scheduling.run_scheduling_cycle(backend=sim)
    assert result is not None  # None only when another cycle held the lock
    return result


def record(image_ref: str, command: str | list[str] = "python train.py", **kw: Any) -> SoloProfile:
    kw.setdefault("gpu_model", "Tesla T4")
    kw.setdefault("samples", RECORDED)
    return solo_profile_record(image=image_ref, command=command, warmup_s=2.0, **kw)


def test_recording_samples_creates_a_profile_keyed_by_image_and_command(db: Any) -> None:
    row = record("pytorch:2.4", batch_size=64, amp=True, model_family="ResNet-18")
    assert SoloProfile.objects.count() == 1
    assert row.gpu_util == pytest.approx(30.0) and row.mem_util == pytest.approx(10.0)
    assert row.gpu_memory_mib == 2650.0 and row.solo_throughput == 400.0 and row.samples == 3
    assert (row.batch_size, row.amp, row.model_family) == (64.0, True, "ResNet-18")
    assert row.command == "python train.py"


def test_a_second_recording_updates_the_profile_weighted_by_its_samples(db: Any) -> None:
    record("pytorch:2.4")
    heavier = [Sample(t=2.0 + i, gpu_util=90.0, mem_util=40.0, memory_mib=3000.0) for i in range(6)]
    row = record("pytorch:2.4", command=["python", "train.py"], samples=heavier)
    assert SoloProfile.objects.count() == 1  # the list and the string are the same command line
    assert row.samples == 9
    assert row.gpu_util == pytest.approx((3 * 30.0 + 6 * 90.0) / 9)
    assert row.gpu_memory_mib == 3000.0  # the peak
    assert row.solo_throughput == 400.0  # the second run reported none


# What the simulated backend's solo sampling records (jobs.solo_sampling.simulated_sample): memory and
# throughput, utilisations NaN because its ground truth (Gavel) measures none.
UNMEASURED = [
    Sample(t=2.0 + i, gpu_util=math.nan, mem_util=math.nan, memory_mib=2600.0, throughput=400.0)
    for i in range(3)
]


def test_a_recording_without_measured_utilisation_stores_it_empty_not_zero(db: Any) -> None:
    row = record("pytorch:2.4", samples=UNMEASURED, batch_size=64)
    row.refresh_from_db()
    assert row.gpu_util is None and row.mem_util is None
    assert (row.gpu_memory_mib, row.solo_throughput, row.samples) == (2600.0, 400.0, 3)
    profile = as_job_profile(row)
    assert "gpu_util" not in profile and "mem_util" not in profile
    assert (profile["gpu_memory_mib"], profile["solo_throughput"], profile["batch_size"]) == (
        2600.0,
        400.0,
        64.0,
    )


def test_sample_dicts_with_null_utilisation_are_not_measured_either(db: Any) -> None:
    samples = [{**s, "gpu_util": None, "mem_util": None} for s in RECORDED]
    row = record("pytorch:2.4", samples=samples)
    assert row.gpu_util is None and row.mem_util is None and row.solo_throughput == 400.0


def test_a_measured_recording_fills_the_utilisation_an_unmeasured_one_left_empty(db: Any) -> None:
    record("pytorch:2.4", samples=UNMEASURED)
    row = record("pytorch:2.4")
    assert row.samples == 6
    assert row.gpu_util == pytest.approx(30.0) and row.mem_util == pytest.approx(10.0)  # not diluted by 0s


def test_an_unmeasured_recording_keeps_the_measured_utilisation(db: Any) -> None:
    record("pytorch:2.4")
    row = record("pytorch:2.4", samples=UNMEASURED)
    row.refresh_from_db()
    assert row.gpu_util == pytest.approx(30.0) and row.mem_util == pytest.approx(10.0)
    assert as_job_profile(row)["gpu_util"] == pytest.approx(30.0)


def test_the_admin_list_says_which_utilisations_were_not_measured(admin_client: Any) -> None:
    record("pytorch:2.4")
    record("pytorch:2.4", command="python other.py", samples=UNMEASURED)
    page = admin_client.get("/admin/jobs/soloprofile/").content.decode()
    assert page.count("not measured") == 2  # SM and memory of the unmeasured row only
    assert "30.0" in page and "10.0" in page  # the measured row's own values


def test_a_recording_with_only_warm_up_samples_is_refused(db: Any) -> None:
    with pytest.raises(ValueError, match="warm-up"):
        record("pytorch:2.4", samples=RECORDED[:2])
    assert not SoloProfile.objects.exists()


def test_a_job_with_the_same_image_and_command_gets_that_profile(researcher, image) -> None:
    record(image.reference, gpu_model="Tesla T4")
    job = submit(researcher, image, gpu_milli=300, gpu_memory_mib=4096)
    other = submit(researcher, image, gpu_milli=300, gpu_memory_mib=4096, command=["python", "eval.py"])
    profile = solo_profile_for_job(job)
    assert profile["gpu_util"] == pytest.approx(30.0) and profile["gpu_memory_mib"] == 2650.0
    # The same identity the node agent's own store uses, so fingerprints line up.
    assert profile["job_key"] == job_key(image.reference, command_line(["python", "train.py"]))
    assert solo_profile_for_job(other) == {}
    assert scheduling.job_request(job, profile).profile == profile


def test_running_tasks_get_their_jobs_profile_and_tolerance_in_the_snapshot(researcher, image) -> None:
    record(image.reference)
    job = submit(researcher, image, gpu_milli=300, gpu_memory_mib=4096, slowdown_tolerance=1.8)
    snapshot = ClusterSnapshot(
        nodes=[],
        running=[
            Placement(job_id=str(job.pk), task_id=f"job-{job.pk}-0", node="n"),
            Placement(job_id="external", task_id="ext-0", node="n"),
        ],
        task_profiles={"ext-0": {"gpu_util": 50.0}},
    )
    fill_running_task_profiles(snapshot)
    mine = snapshot.task_profiles[f"job-{job.pk}-0"]
    assert mine["gpu_util"] == pytest.approx(30.0) and mine["slowdown_tolerance"] == 1.8
    assert snapshot.task_profiles["ext-0"] == {"gpu_util": 50.0}


@pytest.fixture(scope="module")
def trained() -> InterferenceModel:
    with threadpool_limits(limits=1):  # one OpenMP thread: fast on a shared, loaded machine
        return InterferenceModel.fit(synthetic_records(), extras=False)


@pytest.fixture
def interference_profile(
    trained: InterferenceModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> InterferenceModel:
    """A trained model in the model folder and a scheduler profile that uses the plugin."""
    model = trained
    save_model(model, tmp_path / "models" / "interference.joblib")
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path / "models"))
    monkeypatch.setitem(
        profiles.PROFILES,
        "interference_test",
        lambda: Profile(
            name="interference_test",
            filters=("resource_fit", "interference_aware"),
            scores={"interference_aware": 1.0},
            gpu_chooser="interference_aware",
            args={"interference_aware": {"conservative": False}},
        ),
    )
    settings.SCHEDULER_PROFILE = "interference_test"
    return model


def test_the_placement_reason_says_the_model_used_the_measured_profiles(
    sim, researcher, image, interference_profile
) -> None:
    record(image.reference)
    first = submit(researcher, image, gpu_milli=400, gpu_memory_mib=4096)
    assert cycle(sim).admitted == [first.pk]
    second = submit(researcher, image, gpu_milli=400, gpu_memory_mib=4096)
    assert cycle(sim).admitted == [second.pk]
    (task,) = second.tasks.all()
    (first_task,) = first.tasks.all()
    # Two light jobs: packing beats an idle GPU, so the second joins the first and the prediction
    # comes from the trained model on both jobs' measured profiles, not the analytic fallback.
    assert task.gpu_indices == first_task.gpu_indices
    assert interference_profile.describe() in task.placement_reason
    assert "measured solo profile" in task.placement_reason
    assert "analytic estimate" not in task.placement_reason
    assert task.predicted_slowdown is not None and task.predicted_slowdown < 1.5


def test_without_a_stored_profile_the_reason_says_only_the_declared_share_was_known(
    sim, researcher, image, interference_profile
) -> None:
    submit(researcher, image, gpu_milli=400, gpu_memory_mib=4096)
    scheduling.run_scheduling_cycle(backend=sim)
    second = submit(researcher, image, gpu_milli=400, gpu_memory_mib=4096)
    scheduling.run_scheduling_cycle(backend=sim)
    (task,) = second.tasks.all()
    assert "this job's declared GPU share" in task.placement_reason
    assert "measured solo profile" not in task.placement_reason

"""Co-location measurements: two jobs that shared a GPU, against their solo throughputs (issue 21)."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from jobs.colocation import colocation_pair_records, colocation_record, measured_normalised
from jobs.models import ColocationMeasurement
from jobs.profiling_services import solo_profile_record
from scheduler.interference.features import FEATURE_NAMES, ordered_table
from scheduler.interference.online import OnlinePredictor
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    researcher,
    submit,
    team,
)

GPU = "Tesla T4"


def _solo(
    image_ref: str, command: list[str], throughput: float | None, gpu_model: str = GPU, util: bool = True
) -> None:
    """A solo run at 40 % SM and 10 % memory bandwidth, or with neither measured (``util=False``)."""
    gpu_util, mem_util = (40.0, 10.0) if util else (None, None)
    samples = [
        {
            "t": float(t),
            "gpu_util": gpu_util,
            "mem_util": mem_util,
            "memory_mib": 2000.0,
            "throughput": throughput,
        }
        for t in range(5)
    ]
    solo_profile_record(image=image_ref, command=command, gpu_model=gpu_model, samples=samples, warmup_s=1.0)


@pytest.fixture
def pair(researcher, image) -> tuple[Any, Any]:
    a = submit(researcher, image, gpu_milli=500, gpu_memory_mib=2048, command=["python", "a.py"])
    b = submit(researcher, image, gpu_milli=500, gpu_memory_mib=2048, command=["python", "b.py"])
    return a, b


def test_two_jobs_sharing_a_gpu_become_a_measurement_of_their_normalised_throughputs(pair, image) -> None:
    a, b = pair
    _solo(image.reference, ["python", "a.py"], 400.0)
    _solo(image.reference, ["python", "b.py"], 100.0)
    row = colocation_record(
        job_a=a,
        job_b=b,
        gpu_model=GPU,
        throughput_a=300.0,
        throughput_b=50.0,
        share_a_milli=500,
        share_b_milli=500,
        node="n1",
        gpu_index=0,
        predicted_a=0.8,
        predicted_b=0.6,
    )
    assert row is not None and ColocationMeasurement.objects.count() == 1
    assert (row.norm_a, row.norm_b) == (pytest.approx(0.75), pytest.approx(0.5))
    assert (row.predicted_a, row.predicted_b) == (0.8, 0.6)
    assert (row.solo_throughput_a, row.solo_throughput_b) == (400.0, 100.0)


def test_nothing_is_recorded_without_a_solo_throughput_on_that_gpu_model(pair, image) -> None:
    a, b = pair
    _solo(image.reference, ["python", "a.py"], 400.0)
    _solo(image.reference, ["python", "b.py"], 100.0, gpu_model="NVIDIA A100")  # another GPU model
    kwargs = dict(gpu_model=GPU, throughput_a=1.0, throughput_b=1.0, share_a_milli=500, share_b_milli=500)
    assert colocation_record(job_a=a, job_b=b, **kwargs) is None
    _solo(image.reference, ["python", "b.py"], None)  # profiled on the T4, but it reported no rate
    assert colocation_record(job_a=a, job_b=b, **kwargs) is None
    assert not ColocationMeasurement.objects.exists()


def test_the_measured_pair_is_the_mean_of_its_measurements_in_either_order(pair, image) -> None:
    a, b = pair
    _solo(image.reference, ["python", "a.py"], 400.0)
    _solo(image.reference, ["python", "b.py"], 100.0)
    assert measured_normalised(a, b) is None
    common = dict(gpu_model=GPU, share_a_milli=500, share_b_milli=500)
    colocation_record(job_a=a, job_b=b, throughput_a=320.0, throughput_b=60.0, **common)
    colocation_record(job_a=b, job_b=a, throughput_a=40.0, throughput_b=240.0, **common)
    norm_a, norm_b = measured_normalised(a, b)  # type: ignore[misc]
    assert norm_a == pytest.approx((0.8 + 0.6) / 2) and norm_b == pytest.approx((0.6 + 0.4) / 2)
    assert measured_normalised(b, a) == (pytest.approx(norm_b), pytest.approx(norm_a))


def _half_shares_record(a, b):  # type: ignore[no-untyped-def]
    """The training pair of ``a`` and ``b`` measured at 200 and 50 on half a T4 each."""
    colocation_record(
        job_a=a,
        job_b=b,
        gpu_model=GPU,
        throughput_a=200.0,
        throughput_b=50.0,
        share_a_milli=500,
        share_b_milli=500,
    )
    (record,) = colocation_pair_records()
    return record


def test_measurements_become_training_pairs_the_online_correction_learns_from(pair, image) -> None:
    a, b = pair
    _solo(image.reference, ["python", "a.py"], 400.0)
    _solo(image.reference, ["python", "b.py"], 100.0)
    record = _half_shares_record(a, b)
    assert record.dataset == "platform" and record.gpu_type == "t4"
    assert (record.norm_a, record.norm_b) == (0.5, 0.5)
    assert (
        record.profile_a["solo_throughput"] == 400.0
        and record.profile_a["job_key"] != record.profile_b["job_key"]
    )

    class Constant:
        """A model that always predicts 0.9: the residual of the measurement is then -0.4."""

        def predict_records(self, records):  # type: ignore[no-untyped-def]
            import numpy as np

            n = 2 * len(records)
            return np.full(n, 0.9), np.full(n, 0.9), np.ones(n)

    predictor = OnlinePredictor(base=[], fit=lambda _: Constant(), shrink=(1.0, 1.0, 1.0))
    before, _ = predictor.predict([record])
    predictor.observe(record)
    after, _ = predictor.predict([record])
    assert after[0] < before[0] and after[0] > 0.5  # moved towards the measurement, shrunk


def test_a_training_pair_leaves_out_the_utilisation_its_solo_run_did_not_measure(pair, image) -> None:
    a, b = pair
    _solo(image.reference, ["python", "a.py"], 400.0)  # measured, e.g. by the node agent
    _solo(image.reference, ["python", "b.py"], 100.0, util=False)  # the simulated backend: none
    record = _half_shares_record(a, b)
    assert (record.profile_a["gpu_util"], record.profile_a["mem_util"]) == (40.0, 10.0)
    assert "gpu_util" not in record.profile_b and "mem_util" not in record.profile_b
    # The model's features read the missing values as NaN (what its training does for Gavel's rows).
    x = ordered_table([record]).x  # rows: A given B, then B given A
    assert x[0, FEATURE_NAMES.index("s_gpu_util")] == 40.0
    assert np.isnan(x[0, FEATURE_NAMES.index("o_gpu_util")]) and np.isnan(
        x[1, FEATURE_NAMES.index("s_mem_util")]
    )


def test_beats_retraining_waits_for_enough_new_measurements_then_records_its_decision(
    researcher, image, tmp_path, monkeypatch
) -> None:
    from jobs.colocation import interference_retrain
    from scheduler.interference.retrain import read_history

    monkeypatch.setenv("GPU_PLATFORM_MODEL_DIR", str(tmp_path / "models"))
    jobs = {}
    for name, family, tput in (("a", "ResNet", 400.0), ("b", "LM", 100.0), ("c", "GAN", 50.0)):
        command = ["python", f"{name}.py"]
        samples = [
            {"t": float(t), "gpu_util": 40.0, "mem_util": 10.0, "memory_mib": 2000.0, "throughput": tput}
            for t in range(5)
        ]
        solo_profile_record(
            image=image.reference,
            command=command,
            gpu_model=GPU,
            samples=samples,
            warmup_s=1.0,
            model_family=family,
        )
        jobs[name] = submit(researcher, image, gpu_milli=500, gpu_memory_mib=2048, command=command)
    common = dict(gpu_model=GPU, share_a_milli=500, share_b_milli=500)
    colocation_record(job_a=jobs["a"], job_b=jobs["b"], throughput_a=300.0, throughput_b=60.0, **common)
    empty = tmp_path / "no-public-data"
    empty.mkdir()
    assert interference_retrain(min_new=2, data_dir=empty) is None  # one measurement only
    colocation_record(job_a=jobs["a"], job_b=jobs["c"], throughput_a=200.0, throughput_b=40.0, **common)
    colocation_record(job_a=jobs["b"], job_b=jobs["c"], throughput_a=70.0, throughput_b=30.0, **common)
    outcome = interference_retrain(min_new=2, data_dir=empty)
    assert outcome is not None and outcome.accepted and outcome.measurements == 3
    assert read_history(tmp_path / "models")[-1]["version"] == "interference-v1.joblib"
    assert interference_retrain(min_new=2, data_dir=empty) is None  # nothing new since

    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(
        get_user_model().objects.create_superuser("root-admin", "r@example.org", "pw-123456789")
    )
    page = client.get("/admin/jobs/colocationmeasurement/").content.decode()
    assert "interference model in use: interference-v1.joblib" in page


def test_the_job_page_shows_measured_against_predicted_slowdown(pair, image, researcher) -> None:
    from django.test import Client

    a, b = pair
    _solo(image.reference, ["python", "a.py"], 400.0)
    _solo(image.reference, ["python", "b.py"], 100.0)
    colocation_record(
        job_a=a,
        job_b=b,
        gpu_model=GPU,
        throughput_a=200.0,
        throughput_b=80.0,
        share_a_milli=500,
        share_b_milli=500,
        predicted_a=0.8,
    )
    client = Client()
    client.force_login(researcher)
    page = client.get(f"/jobs/{a.pk}/").content.decode()
    assert "Measured interference" in page
    assert f"job {b.pk}" in page and "2.00x" in page and "1.25x" in page  # 1/0.5 measured, 1/0.8 predicted
    other = client.get(f"/jobs/{b.pk}/").content.decode()
    assert "1.25x" in other and "<td>-</td></tr>" in other  # 1/0.8 measured; nothing predicted for b

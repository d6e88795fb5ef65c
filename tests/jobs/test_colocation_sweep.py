"""Two jobs sharing a GPU on the local backend, both reporting throughput, become one measurement,
and its normalised throughputs are the rates the cycle's unpacking rule reads."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jobs import scheduling, sync
from jobs.binding import job_bind
from jobs.colocation import colocation_sweep
from jobs.models import ColocationMeasurement, Job
from jobs.profiling_services import solo_profile_record
from scheduler.backends.base import TaskPhase
from tests.jobs.runtime_fixtures import image, local_backend, researcher, submit, team  # noqa: F401  (fixtures)

PY = sys.executable


@pytest.fixture
def local(tmp_path: Path, settings: Any) -> Any:
    yield from local_backend(settings, tmp_path, virtual_gpus=1)


def _reporting(rate: float, gate: Path) -> list[str]:
    body = f"print('[progress] throughput={rate}', flush=True)\nimport os, time\n"
    body += f"while not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
    return [PY, "-c", body]


def _solo(image_ref: str, command: list[str], gpu_model: str, rate: float) -> None:
    samples = [
        {"t": float(t), "gpu_util": 40.0, "mem_util": 10.0, "memory_mib": 1000.0, "throughput": rate}
        for t in range(4)
    ]
    solo_profile_record(image=image_ref, command=command, gpu_model=gpu_model, samples=samples, warmup_s=1.0)


def test_two_jobs_sharing_a_gpu_and_reporting_throughput_are_recorded_once_with_their_ratios(
    local, researcher, image, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    gpu_model = local.snapshot().nodes[0].gpus[0].model
    ca, cb = _reporting(30.0, gate), _reporting(20.0, gate)
    _solo(image.reference, ca, gpu_model, 40.0)
    _solo(image.reference, cb, gpu_model, 80.0)
    jobs = [
        submit(researcher, image, command=c, gpu_milli=500, cpu_milli=100, memory_mib=64) for c in (ca, cb)
    ]
    try:
        scheduling.run_scheduling_cycle(backend=local)
        for job in jobs:
            assert job_bind(job_id=job.pk, backend=local) == "bound"
        deadline = time.monotonic() + 20
        reported: list[Any] = []
        while len(reported) != 2:
            assert time.monotonic() < deadline, "the two tasks never both reported"
            time.sleep(0.05)
            reported = [s for s in local.task_statuses() if s.phase is TaskPhase.RUNNING and s.throughput]
        assert {s.gpu_indices for s in reported} == {(0,)}

        assert colocation_sweep(local) == 1
        assert colocation_sweep(local) == 1  # the same co-location, updated, not a second row
        (row,) = ColocationMeasurement.objects.all()
        assert (row.job_a_id, row.job_b_id) == (jobs[0].pk, jobs[1].pk)
        assert (row.norm_a, row.norm_b) == (pytest.approx(30.0 / 40.0), pytest.approx(20.0 / 80.0))
        assert (row.share_a_milli, row.share_b_milli, row.gpu_index) == (500, 500, 0)

        # The cycle's view gives the unpacking rule the measured rates (the local backend has none).
        deadline = time.monotonic() + 20
        while {j.status for j in Job.objects.filter(pk__in=[j.pk for j in jobs])} != {"RUNNING"}:
            assert time.monotonic() < deadline, "the jobs never became RUNNING"
            sync.sync_status(backend=local)
            time.sleep(0.05)
        rates = {r.job_id: r.rate for r in scheduling.build_view(local).view.running}
        assert rates == {str(jobs[0].pk): pytest.approx(0.75), str(jobs[1].pk): pytest.approx(0.25)}
    finally:
        gate.touch()

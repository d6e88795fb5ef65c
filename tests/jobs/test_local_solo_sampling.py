"""On the local backend the platform samples NVML itself: a job alone on its GPU, reporting its
throughput, becomes its configuration's ``SoloProfile`` without any node agent.

Real local backend (processes on this machine), real database; only the NVIDIA driver is a recorded
fake (``tests/agent/fake_nvml.py``), since this machine has none.
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jobs import scheduling
from jobs.binding import job_bind
from jobs.models import SoloProfile
from jobs.profiling_services import command_hash, command_line
from jobs.solo_sampling import solo_sample_sweep
from scheduler.backends.base import TaskPhase
from tests.agent.fake_nvml import FakeNvml
from tests.jobs.runtime_fixtures import image, local_backend, researcher, submit, team  # noqa: F401  (fixtures)

PY = sys.executable
GIB = 1024**3


@pytest.fixture
def local(tmp_path: Path, settings: Any) -> Any:
    settings.SOLO_WARMUP_SECONDS = 0.0
    settings.SOLO_PROFILE_SECONDS = 0.3
    yield from local_backend(settings, tmp_path, virtual_gpus=2)


def driver(**kwargs: Any) -> FakeNvml:
    """One machine with two GPUs; GPU 0 busy at 63 % SM and 21 % memory bandwidth, 3 GiB used."""
    device = {"uuid": "GPU-0", "name": "NVIDIA L4", "memory_total": 24 * GIB, "bus_id": "00000000:01:00.0"}
    return FakeNvml(
        {
            "driver_version": "550.90.07",
            "cuda_driver_version": 12040,
            "devices": [
                {**device, "memory_used": 3 * GIB, "util_gpu": 63, "util_mem": 21},
                {**device, "uuid": "GPU-1", "memory_used": 0, "util_gpu": 0, "util_mem": 0},
            ],
        },
        **kwargs,
    )


def reporting(rate: float, gate: Path) -> list[str]:
    body = f"print('[progress] throughput={rate}', flush=True)\nimport os, time\n"
    body += f"while not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
    return [PY, "-c", body]


def running(local: Any, researcher: Any, image: Any, commands: list[list[str]], milli: int) -> list[Any]:
    jobs = [
        submit(researcher, image, command=c, gpu_milli=milli, cpu_milli=100, memory_mib=64) for c in commands
    ]
    scheduling.run_scheduling_cycle(backend=local)
    for job in jobs:
        assert job_bind(job_id=job.pk, backend=local) == "bound"
    deadline = time.monotonic() + 20
    while len([s for s in local.task_statuses() if s.phase is TaskPhase.RUNNING and s.throughput]) < len(
        jobs
    ):
        assert time.monotonic() < deadline, "the tasks never reported"
        time.sleep(0.05)
    return jobs


def sweep_until(local: Any, nvml: FakeNvml, seconds: float) -> int:
    recorded = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        recorded += solo_sample_sweep(local, nvml=nvml)
        time.sleep(0.1)
    return recorded


def test_a_job_alone_on_its_gpu_is_profiled_from_nvml_and_its_reported_throughput(
    local: Any, researcher: Any, image: Any, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    command = reporting(40.0, gate)
    try:
        running(local, researcher, image, [command], milli=500)
        gpu_model = local.snapshot().nodes[0].gpus[0].model

        assert sweep_until(local, driver(), 1.5) == 1  # once profiled, the configuration is done

        row = SoloProfile.objects.get(image=image.reference, command_hash=command_hash(command_line(command)))
        assert row.gpu_model == gpu_model
        assert (row.gpu_util, row.mem_util) == (63.0, 21.0)
        assert row.gpu_memory_mib == 3 * 1024
        assert row.solo_throughput == 40.0
        assert row.samples >= 2
    finally:
        gate.touch()


def test_jobs_sharing_a_gpu_are_not_profiled(
    local: Any, researcher: Any, image: Any, tmp_path: Path, settings: Any
) -> None:
    gate = tmp_path / "gate"
    settings.SCHEDULER_POLICY = "fifo"  # first fit: both shares on GPU 0
    try:
        running(local, researcher, image, [reporting(10.0, gate), reporting(20.0, gate)], milli=400)
        assert len({s.gpu_indices for s in local.task_statuses() if s.phase is TaskPhase.RUNNING}) == 1

        assert sweep_until(local, driver(), 1.0) == 0
        assert not SoloProfile.objects.exists()
    finally:
        gate.touch()


def test_without_a_driver_nothing_is_sampled(local: Any, researcher: Any, image: Any, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    try:
        running(local, researcher, image, [reporting(10.0, gate)], milli=500)

        assert sweep_until(local, driver(driver_loaded=False), 1.0) == 0
        assert not SoloProfile.objects.exists()
    finally:
        gate.touch()

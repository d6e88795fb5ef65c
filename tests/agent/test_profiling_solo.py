"""Solo profiling through NVML, on recorded samples (no GPU needed)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from scheduler.agent.profiling import (
    NoNvidiaDriver,
    ProfileStore,
    Sample,
    job_key,
    open_nvml,
    profile_job,
    read_reported_throughput,
    summarize,
)

MIB = 1024 * 1024

# Recorded from a ResNet-18/CIFAR-10 run (batch 128) alone on a V100: one reading per second,
# (seconds, SM %, memory-controller %, device memory used MiB, job's memory MiB). Warm-up first.
RECORDED = [
    (0, 3, 0, 310, 0),
    (1, 41, 12, 2210, 1900),
    (2, 88, 35, 2890, 2580),
    (3, 91, 37, 2890, 2580),
    (4, 90, 36, 2890, 2580),
    (5, 92, 38, 2954, 2644),
    (6, 89, 35, 2954, 2644),
    (7, 91, 37, 2954, 2644),
]


class RecordedNvml:
    """A pynvml-like module that replays RECORDED, one row per ``nvmlDeviceGetUtilizationRates``."""

    def __init__(
        self, rows: list[tuple[int, int, int, int, int]], pid: int = 4242, driver: bool = True
    ) -> None:
        self.rows, self.pid, self.driver = rows, pid, driver
        self.i = -1
        self.shutdowns = 0

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        if not self.driver:
            raise OSError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shutdowns += 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetName(self, handle: int) -> bytes:  # noqa: N802
        return b"Tesla V100-SXM2-16GB"

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:  # noqa: N802
        self.i = min(self.i + 1, len(self.rows) - 1)
        _, sm, mem, _, _ = self.rows[self.i]
        return SimpleNamespace(gpu=sm, memory=mem)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:  # noqa: N802
        return SimpleNamespace(used=self.rows[self.i][3] * MIB, total=16384 * MIB)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[Any]:  # noqa: N802
        return [
            SimpleNamespace(pid=self.pid, usedGpuMemory=self.rows[self.i][4] * MIB),
            SimpleNamespace(pid=1, usedGpuMemory=300 * MIB),
        ]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_solo_run_becomes_a_profile_without_the_warm_up(tmp_path: Path) -> None:
    clock = Clock()
    tput = tmp_path / "tput"
    tput.write_text("1510.2\n1498.7\n1502.5\n")
    store = ProfileStore(tmp_path / "profiles.jsonl")
    profile = profile_job(
        "registry/resnet:1",
        "python train.py --bs 128",
        duration_s=7,
        warmup_s=2,
        pids={4242},
        throughput_file=tput,
        nvml=RecordedNvml(RECORDED),
        store=store,
        clock=clock,
        sleep=clock.sleep,
    )
    steady = RECORDED[2:]
    assert profile.samples == len(steady)
    assert profile.gpu_util == pytest.approx(sum(r[1] for r in steady) / len(steady))
    assert profile.mem_util == pytest.approx(sum(r[2] for r in steady) / len(steady))
    assert profile.gpu_memory_mib == 2644  # the job's own peak, not the device total
    assert profile.solo_throughput == pytest.approx(1502.5)
    assert profile.gpu_model == "Tesla V100-SXM2-16GB"
    assert store.lookup("registry/resnet:1", "python train.py --bs 128") == profile


def test_the_profile_is_what_the_scheduler_reads() -> None:
    rows = [(t, 50, 20, 1000, 900) for t in range(5)]
    samples = [Sample(t, sm, mem, used) for t, sm, mem, used, _ in rows]
    p = summarize(samples, "img", "cmd", warmup_s=1, extra={"batch_size": 64.0, "model_family": "ResNet-18"})
    job_profile = p.as_job_profile()
    assert job_profile["gpu_util"] == 50 and job_profile["gpu_memory_mib"] == 1000
    assert job_profile["job_key"] == job_key("img", "cmd") != job_key("img", "other cmd")
    assert job_profile["model_family"] == "ResNet-18" and "solo_throughput" not in job_profile


def test_the_latest_profile_of_an_image_and_command_wins(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "p.jsonl")
    samples = [Sample(t, 10.0 * t, 5, 100) for t in range(4)]
    store.save(summarize(samples, "img", "cmd", warmup_s=0))
    store.save(summarize(samples, "img", "cmd", warmup_s=2))
    assert store.lookup("img", "cmd").samples == 2  # type: ignore[union-attr]
    assert store.lookup("img", "other") is None


def test_without_an_nvidia_driver_profiling_says_so_in_one_line() -> None:
    with pytest.raises(NoNvidiaDriver) as info:
        open_nvml(RecordedNvml(RECORDED, driver=False))
    message = str(info.value)
    assert message.startswith("no NVIDIA driver") and "\n" not in message


def test_too_short_a_run_is_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="warm-up"):
        summarize([], "img", "cmd")


def test_reported_throughput_is_the_last_valid_number(tmp_path: Path) -> None:
    f = tmp_path / "t"
    f.write_text("12.5\n13.0\nnan\nprogress\n")
    assert read_reported_throughput(f) == 13.0
    assert read_reported_throughput(tmp_path / "absent") is None

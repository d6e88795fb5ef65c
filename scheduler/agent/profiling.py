"""Solo profiling of a job through NVML: the inputs of the interference model.

While a job runs alone on one GPU the agent samples, every ``interval_s`` seconds, the GPU's SM
utilisation and memory-controller utilisation (``nvmlDeviceGetUtilizationRates``), the memory the
job's processes hold (``nvmlDeviceGetComputeRunningProcesses``; the device's used memory when the
driver does not say per process), and the throughput the job reports itself (samples or steps per
second, e.g. the last number it wrote to ``$GPU_PLATFORM_THROUGHPUT_FILE``). The summary drops the
warm-up samples and keeps::

    gpu_util  = mean SM utilisation (%)          mem_util = mean memory-controller utilisation (%)
    gpu_memory_mib = peak memory of the job       solo_throughput = median reported throughput

It is stored with the job's image and command (``ProfileStore``, one JSON line per profile) and
becomes ``JobRequest.profile`` (``SoloProfile.as_job_profile``; keys of
``scheduler.interference.features.PROFILE_KEYS``). Every NVML call goes through ``nvml``, a
pynvml-like module (``pynvml`` in production, recorded samples in tests). Without an NVIDIA driver,
``open_nvml`` raises ``NoNvidiaDriver`` whose message is one line.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MIB = 1024 * 1024


class NoNvidiaDriver(Exception):
    """NVML cannot start (no driver, library or GPU); the message is one line for the operator."""


def open_nvml(nvml: Any | None = None) -> Any:
    """Import (unless given) and initialise NVML; ``NoNvidiaDriver`` with one line when impossible."""
    if nvml is None:
        try:
            import pynvml as nvml_module
        except ImportError:
            raise NoNvidiaDriver("no NVIDIA driver: the pynvml module is not installed") from None
        nvml = nvml_module
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError subclasses, or OSError when libnvidia-ml is absent
        detail = str(exc) or type(exc).__name__
        raise NoNvidiaDriver(f"no NVIDIA driver: solo profiling needs NVML ({detail})") from None
    return nvml


@dataclass
class Sample:
    """One reading: seconds since the start, utilisations in %, the job's memory, its throughput."""

    t: float
    gpu_util: float
    mem_util: float
    memory_mib: float
    throughput: float | None = None


def read_sample(nvml: Any, gpu_index: int, t: float, pids: set[int] | None = None) -> Sample:
    """One NVML reading of GPU ``gpu_index``; memory of ``pids`` when given and reported."""
    handle = nvml.nvmlDeviceGetHandleByIndex(gpu_index)
    rates = nvml.nvmlDeviceGetUtilizationRates(handle)
    memory = float(nvml.nvmlDeviceGetMemoryInfo(handle).used) / MIB
    if pids:
        try:
            procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except Exception:  # NotSupported on some drivers/containers: keep the device figure
            procs = []
        mine = [p.usedGpuMemory for p in procs if p.pid in pids and p.usedGpuMemory is not None]
        if mine:
            memory = float(sum(mine)) / MIB
    return Sample(t=t, gpu_util=float(rates.gpu), mem_util=float(rates.memory), memory_mib=memory)


def read_reported_throughput(path: Path) -> float | None:
    """The last number in the job's throughput file (one value per line), None if absent/unreadable."""
    try:
        lines = path.read_text().split()
    except OSError:
        return None
    for token in reversed(lines):
        try:
            value = float(token)
        except ValueError:
            continue
        if math.isfinite(value) and value > 0:
            return value
    return None


def sample_job(
    nvml: Any,
    gpu_index: int,
    duration_s: float,
    interval_s: float = 1.0,
    pids: set[int] | None = None,
    throughput: Callable[[], float | None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Sample]:
    """Sample for ``duration_s`` seconds (time injected through ``clock``/``sleep``)."""
    if interval_s <= 0 or duration_s <= 0:
        raise ValueError("duration and interval must be positive")
    start = clock()
    samples = []
    while True:
        now = clock() - start
        if now > duration_s:
            break
        sample = read_sample(nvml, gpu_index, now, pids)
        sample.throughput = throughput() if throughput is not None else None
        samples.append(sample)
        sleep(interval_s)
    return samples


def job_key(image: str, command: str) -> str:
    """Stable identity of a job configuration: same image and command -> same key."""
    digest = hashlib.sha256(f"{image}\0{command}".encode()).hexdigest()[:16]
    return f"platform:{digest}"


@dataclass
class SoloProfile:
    """Summary of one solo run, stored with the job's image and command."""

    image: str
    command: str
    gpu_model: str
    gpu_util: float
    mem_util: float
    gpu_memory_mib: float
    solo_throughput: float | None
    samples: int
    duration_s: float
    extra: dict[str, float | str] = field(default_factory=dict)  # batch_size, amp, model_family

    def as_job_profile(self) -> dict[str, float | str]:
        """``JobRequest.profile`` for the scheduler (keys of interference.features.PROFILE_KEYS)."""
        profile: dict[str, float | str] = {
            "gpu_util": round(self.gpu_util, 3),
            "mem_util": round(self.mem_util, 3),
            "gpu_memory_mib": round(self.gpu_memory_mib, 1),
            "job_key": job_key(self.image, self.command),
        }
        if self.solo_throughput is not None:
            profile["solo_throughput"] = self.solo_throughput
        for key in ("batch_size", "amp", "model_family"):
            if key in self.extra:
                profile[key] = self.extra[key]
        return profile

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SoloProfile:
        return cls(**data)


def summarize(
    samples: list[Sample],
    image: str,
    command: str,
    gpu_model: str = "",
    warmup_s: float = 10.0,
    extra: dict[str, float | str] | None = None,
) -> SoloProfile:
    """Summary of ``samples`` after the first ``warmup_s`` seconds (formulas in the module docstring).

    Raises ValueError when no sample is left after the warm-up (profile longer).
    """
    steady = [s for s in samples if s.t >= warmup_s]
    if not steady:
        raise ValueError(f"no samples after the {warmup_s:.0f} s warm-up; profile for longer")
    reported = [s.throughput for s in steady if s.throughput is not None and s.throughput > 0]
    return SoloProfile(
        image=image,
        command=command,
        gpu_model=gpu_model,
        gpu_util=statistics.fmean(s.gpu_util for s in steady),
        mem_util=statistics.fmean(s.mem_util for s in steady),
        gpu_memory_mib=max(s.memory_mib for s in steady),
        solo_throughput=statistics.median(reported) if reported else None,
        samples=len(steady),
        duration_s=steady[-1].t - steady[0].t,
        extra=dict(extra or {}),
    )


class ProfileStore:
    """Solo profiles in a JSON-lines file, looked up by (image, command); the latest one wins."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def save(self, profile: SoloProfile) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as fh:
            fh.write(json.dumps(profile.to_dict(), sort_keys=True) + "\n")

    def load_all(self) -> list[SoloProfile]:
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            if line.strip():
                out.append(SoloProfile.from_dict(json.loads(line)))
        return out

    def lookup(self, image: str, command: str, gpu_model: str = "") -> SoloProfile | None:
        """Latest profile of this image and command (on ``gpu_model`` when given)."""
        found = None
        for p in self.load_all():
            if p.image == image and p.command == command and (not gpu_model or p.gpu_model == gpu_model):
                found = p
        return found


def profile_job(
    image: str,
    command: str,
    gpu_index: int = 0,
    duration_s: float = 60.0,
    interval_s: float = 1.0,
    warmup_s: float = 10.0,
    pids: set[int] | None = None,
    throughput_file: Path | None = None,
    nvml: Any | None = None,
    store: ProfileStore | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> SoloProfile:
    """Profile a job running alone on GPU ``gpu_index`` and store the result (when ``store``)."""
    lib = open_nvml(nvml)
    try:
        handle = lib.nvmlDeviceGetHandleByIndex(gpu_index)
        name = lib.nvmlDeviceGetName(handle)
        gpu_model = name.decode() if isinstance(name, bytes) else str(name)
        reader = (lambda: read_reported_throughput(throughput_file)) if throughput_file else None
        samples = sample_job(lib, gpu_index, duration_s, interval_s, pids, reader, clock, sleep)
    finally:
        lib.nvmlShutdown()
    profile = summarize(samples, image, command, gpu_model, warmup_s)
    if store is not None:
        store.save(profile)
    return profile

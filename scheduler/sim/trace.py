"""Trace loaders: Philly (Pollux-processed table), Microsoft ITP clusters, Sia/Pollux 160-job samples.

Every loader returns a ``Trace``: jobs sorted by submit time (seconds from the trace's first
submission) and a ``LoadReport`` that counts bad rows with the first few reasons. A bad row is reported
and skipped, never silently dropped and never fatal; a file that is not a recognised trace is an error.

Format detection is by CSV header:
- Philly: ``timestamp,duration,num_gpus,...``
- ITP (raw or ElasticFlow-augmented): ``job_id,submission_time,...,num_gpu,duration``
- Sia / Pollux: ``name,time,application,num_replicas,batch_size`` (no durations: a job's GPU-time is
  drawn, seeded, log-uniformly inside the Pollux size class of its application, the inverse of how
  Pollux/Sia mapped Philly jobs to models: cifar10/ncf < 1 GPU-h, deepspeech2/bert 1-10,
  yolov3 10-100, imagenet 100-1000; duration = GPU-time / replicas).
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

MAX_REPORTED = 5

# Pollux size classes in GPU-hours (lower, upper) per application.
APPLICATION_GPU_HOURS: dict[str, tuple[float, float]] = {
    "cifar10": (0.05, 1.0),
    "ncf": (0.05, 1.0),
    "deepspeech2": (1.0, 10.0),
    "bert": (1.0, 10.0),
    "yolov3": (10.0, 100.0),
    "imagenet": (100.0, 1000.0),
}

# Application -> closest Gavel model family (documented mapping for the Sia/Pollux samples).
APPLICATION_FAMILY: dict[str, str] = {
    "cifar10": "ResNet-18",
    "imagenet": "ResNet-50",
    "bert": "Transformer",
    "deepspeech2": "LM",
    "yolov3": "CycleGAN",
    "ncf": "Recommendation",
}


@dataclass
class TraceJob:
    """One job of a trace. ``duration`` is its service time alone on ideal GPUs (isolated seconds)."""

    job_id: str
    submit: float
    duration: float
    num_gpus: int
    group: str = ""
    # Gavel model family the trace names (Sia/Pollux); empty = draw any job type.
    family: str = ""
    # The team the job is charged to (team quotas, the fairness benchmark): Philly's virtual cluster;
    # ITP's model name (the augmented files: one team per model, the rule docs/quotas.md states);
    # empty when the trace names none.
    team: str = ""


@dataclass
class LoadReport:
    path: str
    kind: str
    rows: int = 0
    bad_rows: int = 0
    reasons: list[str] = field(default_factory=list)

    def bad(self, line: int, why: str) -> None:
        self.bad_rows += 1
        if len(self.reasons) < MAX_REPORTED:
            self.reasons.append(f"line {line}: {why}")

    def summary(self) -> str:
        text = f"{self.path}: {self.kind} trace, {self.rows - self.bad_rows}/{self.rows} rows loaded"
        if self.bad_rows:
            text += f", {self.bad_rows} bad row(s) skipped ({'; '.join(self.reasons)})"
        return text


@dataclass
class Trace:
    jobs: list[TraceJob]
    report: LoadReport

    @property
    def name(self) -> str:
        return Path(self.report.path).stem


class TraceError(ValueError):
    """The file is not a readable trace (missing, empty, unknown header)."""


def _positive_int(value: str) -> int:
    n = int(float(value))
    if n <= 0 or n != float(value):
        raise ValueError(f"expected a positive integer, got {value!r}")
    return n


def _positive_float(value: str) -> float:
    x = float(value)
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"expected a positive number, got {value!r}")
    return x


def load_trace(path: str | Path, seed: int = 0) -> Trace:
    """Load any supported trace file, detecting its format from the header."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"trace file not found: {p}")
    with p.open(newline="") as fh:
        reader = csv.reader(fh)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise TraceError(f"trace file is empty: {p}") from None
        except csv.Error as exc:
            raise TraceError(f"{p} is not a CSV file: {exc}") from None
        cols = set(header)
        rows = list(_rows(reader, p))
    if {"timestamp", "duration", "num_gpus"} <= cols:
        jobs, report = _philly(header, rows, p)
    elif {"submission_time", "duration", "num_gpu"} <= cols:
        jobs, report = _itp(header, rows, p)
    elif {"time", "application", "num_replicas"} <= cols:
        jobs, report = _sia(header, rows, p, seed)
    else:
        raise TraceError(
            f"{p}: unknown trace format (header {','.join(header)}); expected Philly "
            "(timestamp,duration,num_gpus), ITP (submission_time,duration,num_gpu) or "
            "Sia/Pollux (time,application,num_replicas)"
        )
    if not jobs:
        raise TraceError(f"{p}: no valid job rows ({report.summary()})")
    jobs.sort(key=lambda j: j.submit)
    origin = jobs[0].submit
    for j in jobs:
        j.submit -= origin
    return Trace(jobs=jobs, report=report)


def _rows(reader: Iterator[list[str]], path: Path) -> list[list[str]]:
    try:
        return list(reader)
    except csv.Error as exc:
        raise TraceError(f"{path} is not a valid CSV file: {exc}") from None


def _get(header: list[str], row: list[str], name: str) -> str:
    i = header.index(name)
    if i >= len(row):
        raise ValueError(f"missing column {name!r}")
    return row[i].strip()


def _philly(header: list[str], rows: list[list[str]], path: Path) -> tuple[list[TraceJob], LoadReport]:
    report = LoadReport(str(path), "philly")
    jobs: list[TraceJob] = []
    for n, row in enumerate(rows, start=2):
        if not row:
            continue
        report.rows += 1
        try:
            ts = datetime.fromisoformat(_get(header, row, "timestamp")).replace(tzinfo=UTC).timestamp()
            duration = _positive_float(_get(header, row, "duration"))
            gpus = _positive_int(_get(header, row, "num_gpus"))
            group = _get(header, row, "cluster") if "cluster" in header else ""
        except ValueError as exc:
            report.bad(n, str(exc))
            continue
        jobs.append(TraceJob(f"philly-{n - 1}", ts, duration, gpus, group, team=group))
    return jobs, report


def _itp(header: list[str], rows: list[list[str]], path: Path) -> tuple[list[TraceJob], LoadReport]:
    report = LoadReport(str(path), "itp")
    jobs: list[TraceJob] = []
    for n, row in enumerate(rows, start=2):
        if not row:
            continue
        report.rows += 1
        try:
            submit = float(_get(header, row, "submission_time"))
            if not math.isfinite(submit) or submit < 0:
                raise ValueError(f"bad submission_time {submit!r}")
            duration = _positive_float(_get(header, row, "duration"))
            gpus = _positive_int(_get(header, row, "num_gpu"))
            job_id = _get(header, row, "job_id") if "job_id" in header else f"itp-{n - 1}"
            team = _get(header, row, "model_name") if "model_name" in header else ""
        except ValueError as exc:
            report.bad(n, str(exc))
            continue
        jobs.append(TraceJob(job_id or f"itp-{n - 1}", submit, duration, gpus, team=team))
    return jobs, report


def _sia(
    header: list[str], rows: list[list[str]], path: Path, seed: int
) -> tuple[list[TraceJob], LoadReport]:
    report = LoadReport(str(path), "sia-pollux")
    rng = random.Random(f"sia-durations:{seed}")
    jobs: list[TraceJob] = []
    for n, row in enumerate(rows, start=2):
        if not row:
            continue
        report.rows += 1
        try:
            submit = float(_get(header, row, "time"))
            if not math.isfinite(submit) or submit < 0:
                raise ValueError(f"bad time {submit!r}")
            app = _get(header, row, "application")
            if app not in APPLICATION_GPU_HOURS:
                raise ValueError(f"unknown application {app!r}")
            gpus = _positive_int(_get(header, row, "num_replicas"))
            name = _get(header, row, "name") if "name" in header else f"job-{n - 1}"
        except ValueError as exc:
            report.bad(n, str(exc))
            continue
        lo, hi = APPLICATION_GPU_HOURS[app]
        gpu_hours = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        duration = max(60.0, gpu_hours * 3600.0 / gpus)
        jobs.append(TraceJob(name, submit, duration, gpus, app, APPLICATION_FAMILY[app]))
    return jobs, report

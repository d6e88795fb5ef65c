"""Trace loaders: every format is recognised, bad rows are counted and reported, never silent."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.datapaths import default_data_dir
from scheduler.sim.trace import TraceError, load_trace


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_philly_rows_load_relative_to_the_first_submission_and_bad_rows_are_counted(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "philly.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-01 00:00:10,100.0,1,100.0,vcA\n"
        "2017-10-01 00:00:00,50.0,2,100.0,vcB\n"
        "2017-10-01 00:01:00,-5,1,0,vcA\n"
        "not a date,10,1,10,vcA\n"
        "2017-10-01 00:02:00,10,1.5,15,vcA\n",
    )
    trace = load_trace(path)
    assert [(j.submit, j.duration, j.num_gpus, j.group) for j in trace.jobs] == [
        (0.0, 50.0, 2, "vcB"),
        (10.0, 100.0, 1, "vcA"),
    ]
    assert trace.report.rows == 5
    assert trace.report.bad_rows == 3
    assert "line 4" in trace.report.summary() and "3 bad row(s) skipped" in trace.report.summary()


def test_itp_raw_rows_keep_their_job_ids(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "cluster99.csv",
        "job_id,submission_time,duration,num_gpu\nx1,500,600,8\nx2,100,700,1\nx3,200,,1\n",
    )
    trace = load_trace(path)
    assert [(j.job_id, j.submit, j.num_gpus) for j in trace.jobs] == [("x2", 0.0, 1), ("x1", 400.0, 8)]
    assert trace.report.kind == "itp" and trace.report.bad_rows == 1


def test_sia_pollux_jobs_get_seeded_durations_inside_their_size_class(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "workload.csv",
        "name,time,application,num_replicas,batch_size\n"
        "cifar10-0,0,cifar10,1,128\nimagenet-1,60,imagenet,4,400\nfoo-2,70,unknown,1,1\n",
    )
    a, b = load_trace(path, seed=1), load_trace(path, seed=1)
    assert [j.duration for j in a.jobs] == [j.duration for j in b.jobs]
    assert a.report.bad_rows == 1
    cifar, imagenet = a.jobs
    assert 0.05 * 3600 <= cifar.duration <= 3600 and cifar.family == "ResNet-18"
    assert 100 * 3600 / 4 <= imagenet.duration <= 1000 * 3600 / 4 and imagenet.family == "ResNet-50"
    assert [j.duration for j in load_trace(path, seed=2).jobs] != [j.duration for j in a.jobs]


def test_unknown_missing_and_empty_files_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="unknown trace format"):
        load_trace(write(tmp_path, "x.csv", "a,b\n1,2\n"))
    with pytest.raises(TraceError, match="not found"):
        load_trace(tmp_path / "missing.csv")
    with pytest.raises(TraceError, match="empty"):
        load_trace(write(tmp_path, "e.csv", ""))
    with pytest.raises(TraceError, match="no valid job rows"):
        load_trace(write(tmp_path, "bad.csv", "job_id,submission_time,duration,num_gpu\nx,1,0,1\n"))


@pytest.mark.data
def test_the_shared_philly_slice_loads_every_row() -> None:
    path = default_data_dir() / "traces/philly/philly_jobs_2017-09-04_to_2017-11-30.csv"
    if not path.is_file():
        pytest.skip(f"shared data not found: {path}")
    trace = load_trace(path)
    assert len(trace.jobs) == 74167 and trace.report.bad_rows == 0
    assert sum(j.num_gpus == 1 for j in trace.jobs) == 69294

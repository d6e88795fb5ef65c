"""The team benchmarks' commands: bad input is one line and exit code 2; a tiny trace writes the
result file with the goals checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.__main__ import main

PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def write_trace(tmp_path: Path, rows: str, header: str = PHILLY_HEADER) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(header + rows)
    return path


def test_a_trace_without_teams_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path, "j1,10,30,1\n", header="job_id,submission_time,duration,num_gpu\n")
    code = main(["fairness", "--trace", str(trace), "--cluster", "small", "--json", str(tmp_path / "o.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [f"error: {trace}: the trace names no teams (Philly's cluster column, ITP's model_name)"]
    assert not (tmp_path / "o.json").exists()


def test_a_bad_limit_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path, "2017-10-01 00:00:00,50.0,1,50.0,vcA\n")
    code = main(
        [
            "eta-accuracy",
            "--trace",
            str(trace),
            "--cluster",
            "small",
            "--limit",
            "0",
            "--json",
            str(tmp_path / "o.json"),
        ]
    )
    assert code == 2
    assert capsys.readouterr().err.strip() == "error: --start must be >= 0 and --limit > 0"


def test_fairness_writes_both_runs_and_the_goals(tmp_path: Path) -> None:
    rows = "".join(f"2017-10-01 00:{m:02d}:00,600.0,1,600.0,{'vcA' if m % 2 else 'vcB'}\n" for m in range(8))
    out = tmp_path / "fairness.json"
    assert (
        main(
            [
                "fairness",
                "--trace",
                str(write_trace(tmp_path, rows)),
                "--cluster",
                "small",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    assert {t: v["guarantee_gpus"] for t, v in report["teams"].items()} == {"vcA": 1, "vcB": 1}
    assert set(report["runs"]) == {"quotas", "no_quotas"}
    assert report["goals"]["reclaim_p99_bound_s"] == 40.0
    assert set(report["runs"]["quotas"]["per_team_avg_jct_s"]) == {"vcA", "vcB"}

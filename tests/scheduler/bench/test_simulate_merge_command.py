"""``python -m scheduler.bench.simulate.merge``: one report from per-policy simulate runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.bench.simulate.merge import main


def _report(trace: str, policy: str, jct: float) -> dict[str, Any]:
    stats = {
        "jobs": 10, "avg_jct_s": jct, "median_jct_s": jct, "p95_jct_s": jct, "p99_jct_s": jct,
        "avg_queueing_s": 0.0, "makespan_s": 1.0, "gpu_alloc_util": 0.5, "useful_util": 0.5,
        "gpu_alloc_util_contended": 0.5, "useful_util_contended": 0.5, "tolerance_violations": 0,
        "preemptions": 0, "jobs_per_s": 1.0, "jobs_per_cpu_s": 1.0, "description": "", "profile": "",
    }  # fmt: skip
    return {
        "trace": trace,
        "jobs": 10,
        "cluster": {"name": "c", "total_gpus": 8},
        "config": {"seed": 0},
        "policies": {policy: stats},
    }


def test_merging_two_runs_writes_one_report_with_both_policies(tmp_path: Path) -> None:
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "out.json"
    a.write_text(json.dumps(_report("t", "k8s", 100.0)))
    b.write_text(json.dumps(_report("t", "ours", 40.0)))
    assert main([str(out), str(a), str(b)]) == 0
    merged = json.loads(out.read_text())
    assert set(merged["policies"]) == {"k8s", "ours"}
    assert merged["ratios_vs_k8s"]["ours"]["avg_jct"] == pytest.approx(0.4)


def test_runs_of_different_traces_are_refused_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "out.json"
    a.write_text(json.dumps(_report("t", "k8s", 1.0)))
    b.write_text(json.dumps(_report("u", "ours", 1.0)))
    assert main([str(out), str(a), str(b)]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert not out.exists()

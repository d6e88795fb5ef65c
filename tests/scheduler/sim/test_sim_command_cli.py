"""``python -m scheduler simulate`` end to end on a small trace, and its one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.__main__ import main
from scheduler.datapaths import default_data_dir
from scheduler.sim.engine import SimConfig
from scheduler.sim.runner import load_inputs, run_policies

DATA = default_data_dir()
needs_gavel = pytest.mark.skipif(
    not (DATA / "interference/gavel/gavel_pairs_single_gpu.csv").is_file(),
    reason=f"shared Gavel data not found under {DATA}",
)

SPEC = """name: tiny
gavel_gpu_type: v100
node_groups:
  - count: 2
    gpus: 4
    gpu_model: V100
    gpu_memory_mib: 16384
"""


def small_trace(tmp_path: Path) -> Path:
    lines = ["job_id,submission_time,duration,num_gpu"]
    for i in range(40):
        lines.append(f"j{i},{i * 30},{600 + (i * 137) % 3000},{[1, 1, 1, 2, 4][i % 5]}")
    lines.append("broken,1,x,1")
    path = tmp_path / "trace.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@needs_gavel
def test_simulate_writes_metrics_for_each_policy_and_a_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(SPEC)
    out, png = tmp_path / "out.json", tmp_path / "out.png"
    code = main([
        "simulate", "--trace", str(small_trace(tmp_path)), "--cluster", str(spec), "--policy", "k8s",
        "--policy", "ours", "--policy", "gpushare", "--seed", "3", "--json", str(out), "--plot", str(png), "--quiet",
    ])  # fmt: skip
    assert code == 0
    report = json.loads(out.read_text())
    assert report["trace_load"]["bad_rows"] == 1 and report["jobs"] == 40
    assert set(report["policies"]) == {"k8s", "ours", "gpushare"}
    for summary in report["policies"].values():
        assert summary["jobs"] == 40 and summary["jobs_per_s"] > 0
        assert summary["avg_jct_s"] >= summary["avg_queueing_s"] >= 0
        assert 0 < summary["gpu_alloc_util"] <= 1
    assert report["ratios_vs_k8s"]["k8s"]["avg_jct"] == pytest.approx(1.0)
    assert png.stat().st_size > 10_000
    assert "1 bad row(s) skipped" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "nope"], "unknown policy 'nope'"),
        (["--policy", "k8s", "--cluster", "no-such-cluster"], "cluster spec 'no-such-cluster' not found"),
        (["--policy", "k8s", "--trace", "/nonexistent.csv"], "trace file not found"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    base = {"--trace": str(small_trace(tmp_path)), "--cluster": "philly-512"}
    for flag in ("--trace", "--cluster"):
        if flag in args:
            base[flag] = args[args.index(flag) + 1]
    policies = [a for i, a in enumerate(args) if i and args[i - 1] == "--policy"]
    argv = [
        "simulate",
        "--trace",
        base["--trace"],
        "--cluster",
        base["--cluster"],
        "--json",
        str(tmp_path / "o.json"),
    ]
    for p in policies:
        argv += ["--policy", p]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


@needs_gavel
def test_a_slice_of_the_trace_starts_at_time_zero(tmp_path: Path) -> None:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(SPEC)
    trace, cluster, perf = load_inputs(small_trace(tmp_path), str(spec), DATA, 0)
    report, raw = run_policies(trace, cluster, perf, ["fifo"], SimConfig(), limit=5, start=10)
    assert report["jobs"] == 5 and report["first_job"] == 10
    # Jobs 10..14 were submitted 30 s apart from t = 300 s; the slice replays them from t = 0.
    assert list(raw["fifo"].submit) == [0.0, 30.0, 60.0, 90.0, 120.0]

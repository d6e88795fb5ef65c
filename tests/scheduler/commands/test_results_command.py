"""``python -m scheduler results run|check``: the result set re-run from a checkout, and the field by
field comparison with the committed files."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.__main__ import main
from scheduler.commands.results import child_env, result_set
from scheduler.datapaths import default_data_dir, results_dir
from scheduler.interference.store import MODEL_DIR_ENV, default_model_path

DATA = default_data_dir()

REPORT: dict[str, Any] = {
    "trace": "../shared/data/traces/philly/philly_jobs.csv",
    "jobs": 3,
    "config": {"seed": 0, "window": 64},
    "policies": {
        "ours": {
            "avg_jct_s": 100.5,
            "preemptions": 7,
            "jct_cdf_s": [1.0, 2.0, 3.0],
            "wall_s": 1.2,
            "cpu_s": 1.1,
            "jobs_per_s": 2.5,
            "jobs_per_cpu_s": 2.7,
        }
    },
    "provenance": {"code": {"commit": "a" * 40, "dirty": False}},
}


def write(folder: Path, report: dict[str, Any], name: str = "sim_x.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(report, indent=1))
    return path


def check(against: Path, rerun: Path, *extra: str) -> int:
    return main(["results", "check", "--against", str(against), "--rerun", str(rerun), *extra])


def test_check_passes_on_files_that_differ_only_in_speed_provenance_and_data_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "committed", REPORT)
    rerun = copy.deepcopy(REPORT)
    rerun["policies"]["ours"].update(wall_s=9.9, cpu_s=9.0, jobs_per_s=0.1, jobs_per_cpu_s=0.2)
    rerun["provenance"] = {"code": {"commit": "b" * 40, "dirty": True}}
    rerun["trace"] = "/somewhere/else/shared/data/traces/philly/philly_jobs.csv"
    write(tmp_path / "rerun", rerun)
    assert check(tmp_path / "committed", tmp_path / "rerun") == 0
    out = capsys.readouterr().out
    assert "sim_x.json: identical" in out and "1/1 identical" in out


def test_check_prints_each_changed_field_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "committed", REPORT)
    rerun = copy.deepcopy(REPORT)
    rerun["policies"]["ours"]["preemptions"] = 8
    rerun["policies"]["ours"]["jct_cdf_s"][1] = 2.5
    del rerun["config"]["window"]
    rerun["policies"]["ours"]["migrations"] = 1
    write(tmp_path / "rerun", rerun)
    assert check(tmp_path / "committed", tmp_path / "rerun") == 1
    out = capsys.readouterr().out
    assert "sim_x.json: 4 differing field(s)" in out
    assert "policies.ours.preemptions: committed 7, re-run 8" in out
    assert "policies.ours.jct_cdf_s[1]: committed 2.0, re-run 2.5" in out
    assert "config.window: missing in the re-run" in out
    assert "policies.ours.migrations: only in the re-run" in out
    assert "0/1 identical" in out


def test_a_float_that_moved_in_its_last_digit_is_a_difference_unless_a_tolerance_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "committed", REPORT)
    rerun = copy.deepcopy(REPORT)
    rerun["policies"]["ours"]["avg_jct_s"] = 100.50000000001
    write(tmp_path / "rerun", rerun)
    assert check(tmp_path / "committed", tmp_path / "rerun") == 1
    assert "policies.ours.avg_jct_s" in capsys.readouterr().out
    assert check(tmp_path / "committed", tmp_path / "rerun", "--rel-tol", "1e-9") == 0


def test_check_reports_a_rerun_file_with_no_committed_counterpart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "committed", REPORT)
    write(tmp_path / "rerun", REPORT, name="sim_new.json")
    assert check(tmp_path / "committed", tmp_path / "rerun") == 1
    assert "sim_new.json: no committed file of this name" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["results", "check", "--rerun", "/nonexistent/rerun"], "/nonexistent/rerun: no such directory"),
        (["results", "run", "--data", "/nonexistent/data"], "data folder not found: /nonexistent/data"),
        (["results", "run", "--data", "/", "--only", "sim_nope"], "unknown result 'sim_nope'"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_check_with_nothing_to_compare_is_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    assert check(tmp_path, tmp_path / "empty") == 2
    assert "no result JSON to compare" in capsys.readouterr().err


def test_run_refuses_without_a_trained_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path))
    assert main(["results", "run", "--data", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "make models" in err and not (tmp_path / "out").exists()


def test_the_sim_set_is_the_ten_committed_runs_with_all_seven_policies() -> None:
    runs = result_set("sim")
    assert len(runs) == 10
    committed = {p.stem for p in results_dir().glob("sim_*.json")}
    assert {r.name for r in runs} == committed
    for r in runs:
        argv = [a for u in r.units for a in u.argv]
        policies = {argv[i + 1] for i, a in enumerate(argv) if a == "--policy"}
        assert policies == {"k8s", "fifo", "sjf", "tiresias", "gandiva", "gpushare", "ours"}
        assert argv[argv.index("--seed") + 1] == "0"
        # The committed file's recorded inputs are the ones this run passes.
        report = json.loads((results_dir() / f"{r.name}.json").read_text())
        assert argv[argv.index("--cluster") + 1] == report["cluster"]["name"]
        traces = report.get("traces") or [report["trace"]]
        passed = [
            argv[i + 1].replace("{data}", "../shared/data") for i, a in enumerate(argv) if a == "--trace"
        ]
        assert sorted(set(passed)) == sorted(traces)
        if "first_job" in report and report["first_job"]:
            assert argv[argv.index("--start") + 1] == str(report["first_job"])


def test_the_frag_set_names_the_committed_frag_files() -> None:
    names = {r.name for r in result_set("frag")}
    committed = {p.stem for p in results_dir().glob("frag_*.json")}
    assert names == committed


def test_runs_pin_the_openblas_kernel_the_set_was_made_with(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_CORETYPE", "SkylakeX")
    import platform

    env = child_env("Haswell")
    if platform.machine() == "x86_64" and " avx2" in Path("/proc/cpuinfo").read_text():
        assert env["OPENBLAS_CORETYPE"] == "Haswell"
    assert child_env("")["OPENBLAS_CORETYPE"] == "SkylakeX"  # empty: left as it is


@pytest.mark.data
@pytest.mark.skipif(
    not (DATA / "traces/sia-workloads/saturn").is_dir(), reason=f"Sia traces not under {DATA}"
)
@pytest.mark.skipif(not default_model_path().is_file(), reason="no trained model (run `make models`)")
def test_a_rerun_of_one_committed_result_is_identical_to_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rerun"
    code = main(
        ["results", "run", "--data", str(DATA), "--out", str(out), "--only", "sim_sia_saturn", "--no-plots"]
    )
    assert code == 0
    report = json.loads((out / "sim_sia_saturn.json").read_text())
    recorded = {Path(d["path"]).name for d in report["provenance"]["data"]}
    assert {f"workload-{i}.csv" for i in range(1, 11)} <= recorded
    assert check(results_dir(), out) == 0, capsys.readouterr().out

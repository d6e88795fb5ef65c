"""``python -m scheduler interference train|evaluate`` end to end on small synthetic data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.__main__ import main
from scheduler.interference.datasets import PairRecord
from scheduler.interference.store import load_model
from tests.scheduler.interference.interference_helpers import write_gavel_format, write_lucid_format


@pytest.fixture
def data_dir(tmp_path: Path, records: list[PairRecord]) -> Path:
    root = tmp_path / "data"
    write_gavel_format(
        root / "interference" / "gavel" / "gavel_pairs_single_gpu.csv", records, infeasible_every=9
    )
    write_lucid_format(root / "interference" / "lucid", records)
    return root


def test_train_uses_only_permissively_licensed_data_by_default(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "m.joblib"
    assert main(["interference", "train", "--data", str(data_dir), "--out", str(out)]) == 0
    model = load_model(out)
    assert model.datasets == ("gavel",) and not model.research_only
    assert "trained gradient_boosting model on gavel" in capsys.readouterr().out


def test_evaluate_reports_cross_validation_test_files_and_latency(
    data_dir: Path, tmp_path: Path, records: list[PairRecord]
) -> None:
    model = tmp_path / "m.joblib"
    assert (
        main(
            [
                "interference",
                "train",
                "--data",
                str(data_dir),
                "--out",
                str(model),
                "--datasets",
                "gavel,lucid",
            ]
        )
        == 0
    )
    test_csv = tmp_path / "held_out.csv"
    write_gavel_format(test_csv, records[:30])
    report_path, plot = tmp_path / "r.json", tmp_path / "r.png"
    code = main(
        [
            "interference",
            "evaluate",
            "--model",
            str(model),
            "--data",
            str(data_dir),
            "--test",
            str(test_csv),
            "--json",
            str(report_path),
            "--plot",
            str(plot),
            "--folds",
            "2",
            "--compare",
            "linear",
        ]
    )
    assert code == 0
    report = json.loads(report_path.read_text())
    cv = report["cross_validation"]
    assert set(cv["model"]["metrics"]) == {"gavel", "lucid"}
    gavel = cv["model"]["metrics"]["gavel"]
    for key in ("mae", "r2", "mape_slowdown", "pack_accuracy", "always_pack_accuracy"):
        assert key in gavel
    assert 0 <= gavel["pack_accuracy"] <= 1 and gavel["mae"] < 0.2
    assert "linear" in cv["estimators"]
    assert report["test"][str(test_csv)]["gavel"]["pairs"] == 30
    assert report["latency"]["with_model"]["median_ms_per_candidate"] > 0
    assert plot.stat().st_size > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["interference", "train", "--data", "/nonexistent/folder"], "data folder not found"),
        (["interference", "train", "--data", ".", "--datasets", "gavel"], "not found under"),
        (["interference", "train", "--data", ".", "--datasets", "imagenet"], "unknown dataset"),
        (
            [
                "interference",
                "evaluate",
                "--model",
                "/nonexistent.joblib",
                "--data",
                ".",
                "--json",
                "/tmp/x.json",
            ],
            "model file not found",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err

"""``interference train --exclude-family``: a starting model that has never seen some families."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.__main__ import main
from scheduler.commands.interference import exclude_families
from scheduler.interference.datasets import PairRecord, load_datasets
from scheduler.interference.store import load_model
from tests.scheduler.interference.interference_helpers import FAMILIES, write_gavel_format


@pytest.fixture
def data_dir(tmp_path: Path, records: list[PairRecord]) -> Path:
    root = tmp_path / "data"
    write_gavel_format(root / "interference" / "gavel" / "gavel_pairs_single_gpu.csv", records)
    return root


def _families(record: PairRecord) -> set[str]:
    return {str(record.profile_a["model_family"]), str(record.profile_b["model_family"])}


def test_exclude_drops_exactly_the_pairs_with_an_excluded_family(records: list[PairRecord]) -> None:
    kept = exclude_families(records, ["alpha", "gamma"])
    expected = [r for r in records if not _families(r) & {"alpha", "gamma"}]
    assert kept == expected
    # Pairs of an excluded family with a kept one go too, not only same-family pairs.
    assert any(_families(r) == {"alpha", "beta"} for r in records)
    assert not any(_families(r) & {"alpha", "gamma"} for r in kept)
    assert 0 < len(kept) < len(records)


def test_no_exclusion_keeps_every_pair(records: list[PairRecord]) -> None:
    assert exclude_families(records, []) == records


def test_train_with_exclusion_fits_on_the_remaining_pairs_and_records_it(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "m.joblib"
    args = ["interference", "train", "--data", str(data_dir), "--out", str(out)]
    assert main([*args, "--exclude-family", "alpha", "--exclude-family", "beta"]) == 0
    all_rows = load_datasets(data_dir, ["gavel"])
    left = [r for r in all_rows if not _families(r) & {"alpha", "beta"}]
    model = load_model(out)
    assert model.meta["excluded_families"] == ["alpha", "beta"]
    assert model.n_pairs == len(left)
    assert f"{len(all_rows) - len(left)} of {len(all_rows)} pairs left out" in capsys.readouterr().out


def test_unknown_family_exits_2_with_one_line_naming_the_known_families(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "m.joblib"
    code = main(
        ["interference", "train", "--data", str(data_dir), "--out", str(out), "--exclude-family", "omega"]
    )
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert len(err.strip().splitlines()) == 1
    assert "'omega'" in err and all(f in err for f in FAMILIES)

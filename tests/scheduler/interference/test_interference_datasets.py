"""Loaders turn Gavel- and Lucid-format files into one tidy table of pairs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from scheduler.datapaths import default_data_dir
from scheduler.interference.datasets import (
    DatasetError,
    PairRecord,
    available_datasets,
    load_dataset,
    load_gavel_pairs,
    load_profiled_pairs,
    load_test_csv,
)
from tests.scheduler.interference.interference_helpers import write_gavel_format, write_lucid_format


def test_lucid_format_pairs_are_joined_with_their_solo_profiles(
    tmp_path: Path, records: list[PairRecord]
) -> None:
    write_lucid_format(tmp_path, records[:20])
    loaded = load_profiled_pairs(tmp_path / "colocate_info.shared.csv", tmp_path / "single_data.csv")
    assert len(loaded) == 20
    first = loaded[0]
    assert first.profile_a["gpu_util"] == pytest.approx(records[0].profile_a["gpu_util"])
    assert first.norm_a == pytest.approx(records[0].norm_a, abs=1e-4)
    assert first.feasible and first.gpu_type == "rtx3090"


def test_gavel_format_marks_pairs_recorded_as_zero_infeasible(
    tmp_path: Path, records: list[PairRecord]
) -> None:
    path = tmp_path / "pairs.csv"
    write_gavel_format(path, records[:12], infeasible_every=4)
    loaded = load_gavel_pairs(path)
    infeasible = [r for r in loaded if not r.feasible]
    assert len(infeasible) == 3
    assert all(math.isnan(r.norm_a) for r in infeasible)
    assert loaded[1].profile_a["job_key"].startswith("gavel:v100:")


def test_group_is_the_unordered_family_pair(records: list[PairRecord]) -> None:
    r = records[5]
    swapped = PairRecord(r.dataset, r.gpu_type, r.profile_b, r.profile_a, r.feasible, r.norm_b, r.norm_a)
    assert r.group == swapped.group


def test_a_test_csv_is_recognised_by_its_columns(tmp_path: Path, records: list[PairRecord]) -> None:
    write_gavel_format(tmp_path / "g.csv", records[:5])
    write_lucid_format(tmp_path / "lucid", records[:5])
    assert load_test_csv(tmp_path / "g.csv", None)[0].dataset == "gavel"
    assert load_test_csv(tmp_path / "lucid" / "colocate_info.shared.csv", None)[0].dataset == "lucid"
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DatasetError, match="match neither"):
        load_test_csv(tmp_path / "other.csv", None)


def test_a_missing_column_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "bad.csv").write_text("gpu_type,job_a\nv100,x\n")
    with pytest.raises(DatasetError, match="missing column"):
        load_gavel_pairs(tmp_path / "bad.csv")


def test_a_pair_without_a_solo_profile_is_reported(tmp_path: Path, records: list[PairRecord]) -> None:
    write_lucid_format(tmp_path, records[:3])
    (tmp_path / "single_data.csv").write_text(
        "model,dataset,batchsize,amp,speed,gpu_util,gmem_util,gmem,label\n"
    )
    with pytest.raises(DatasetError, match="no solo profile"):
        load_profiled_pairs(tmp_path / "colocate_info.shared.csv", tmp_path / "single_data.csv")


@pytest.mark.data
def test_the_shared_data_loads_into_the_documented_numbers_of_pairs() -> None:
    data = default_data_dir()
    if "gavel" not in available_datasets(data) or "lucid" not in available_datasets(data):
        pytest.skip(f"shared interference data not found under {data}")
    gavel = load_dataset(data, "gavel")
    lucid = load_dataset(data, "lucid")
    assert len(gavel) == 831 and sum(r.feasible for r in gavel) == 761
    assert len(lucid) == 1120 and all(r.feasible for r in lucid)
    assert all("gpu_util" in r.profile_a and "gpu_util" in r.profile_b for r in lucid)

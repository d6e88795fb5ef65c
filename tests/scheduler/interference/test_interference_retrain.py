"""Guarded retraining: a candidate replaces the model in use only if it is no worse on own data."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from scheduler.interference.datasets import PairRecord
from scheduler.interference.online import default_fit
from scheduler.interference.retrain import read_history, retrain_guarded
from scheduler.interference.store import DEFAULT_MODEL_FILE, load_model

LINEAR = default_fit(0, "linear")


def _split(records: list[PairRecord]) -> tuple[list[PairRecord], list[PairRecord]]:
    """Own measurements: every pair with an alpha job (7 family pairs); base: the rest."""
    own = [r for r in records if "alpha" in r.group]
    return [r for r in records if "alpha" not in r.group], own


def _inverted(records: list[PairRecord]) -> list[PairRecord]:
    """Wrong labels: a light partner measured as a heavy one and the other way round."""
    return [dataclasses.replace(r, norm_a=1.05 - r.norm_a, norm_b=1.05 - r.norm_b) for r in records]


def test_retraining_keeps_the_model_in_use_when_the_candidate_is_worse(
    records: list[PairRecord], tmp_path: Path
) -> None:
    base, own = _split(records)
    good = LINEAR(records)  # has seen the truth everywhere
    outcome = retrain_guarded(base=_inverted(base), own=own, old=good, model_dir=tmp_path, fit=LINEAR)
    assert not outcome.accepted
    assert outcome.new_error is not None and outcome.old_error is not None
    assert outcome.new_error > outcome.old_error
    assert not (tmp_path / DEFAULT_MODEL_FILE).exists()  # the platform's file untouched
    assert (tmp_path / outcome.version).is_file()  # the candidate is still kept, versioned
    (entry,) = read_history(tmp_path)
    assert entry["accepted"] is False and entry["new_error"] == outcome.new_error
    assert entry["old_error"] == outcome.old_error


def test_retraining_replaces_a_worse_model_and_names_the_new_version(
    records: list[PairRecord], tmp_path: Path
) -> None:
    base, own = _split(records)
    bad = LINEAR(_inverted(records))
    first = retrain_guarded(base=base, own=own, old=bad, model_dir=tmp_path, fit=LINEAR)
    assert first.accepted and first.version == "interference-v1.joblib"
    in_use = load_model(tmp_path / DEFAULT_MODEL_FILE)
    assert in_use.meta["version"] == "interference-v1.joblib"
    assert in_use.meta["own_measurements"] == len(own)
    second = retrain_guarded(base=base, own=own, old=in_use, model_dir=tmp_path, fit=LINEAR)
    assert second.version == "interference-v2.joblib"
    assert [e["version"] for e in read_history(tmp_path)] == [
        "interference-v1.joblib",
        "interference-v2.joblib",
    ]


def test_too_few_own_measurements_are_not_a_reason_to_retrain(
    records: list[PairRecord], tmp_path: Path
) -> None:
    base, own = _split(records)
    outcome = retrain_guarded(
        base=base, own=own[:3], old=None, model_dir=tmp_path, fit=LINEAR, min_measurements=10
    )
    assert not outcome.accepted and outcome.version == ""
    assert "fewer than 10" in outcome.reason
    assert not list(tmp_path.glob("*.joblib"))


def test_own_measurements_of_one_family_pair_cannot_be_cross_validated(
    records: list[PairRecord], tmp_path: Path
) -> None:
    own = [r for r in records if r.group == "lucid:alpha|beta"]
    outcome = retrain_guarded(
        base=records, own=own, old=None, model_dir=tmp_path, fit=LINEAR, min_measurements=1
    )
    assert not outcome.accepted and "fewer than two model-family pairs" in outcome.reason
    assert outcome.new_error is None
    assert read_history(tmp_path)[0]["new_error"] is None


@pytest.fixture(autouse=True)
def _no_platform_model_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPU_PLATFORM_MODEL_DIR", str(tmp_path / "unused"))

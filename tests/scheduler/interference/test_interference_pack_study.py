"""Nested pack-decision study: thresholds and the method are chosen on training folds only."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import pytest
from threadpoolctl import threadpool_limits

from scheduler.bench.interference.pack_study import nested_pack_study
from scheduler.interference.datasets import PairRecord
from scheduler.interference.models import InterferenceModel
from tests.scheduler.interference.interference_helpers import FAMILIES


def _fast_fit(records: Sequence[PairRecord], seed: int = 0) -> InterferenceModel:
    return InterferenceModel.fit(records, seed=seed, extras=False)


@pytest.fixture(scope="module")
def study(records: list[PairRecord]) -> dict[str, object]:
    # Every fifth pair recorded as unable to run (out of memory), as in Gavel.
    # Four families (10 family pairs) keep it quick; one OpenMP thread avoids oversubscription.
    small = [
        r for r in records if {r.profile_a["model_family"], r.profile_b["model_family"]} <= set(FAMILIES[:4])
    ]
    data = [
        dataclasses.replace(r, feasible=False, norm_a=math.nan, norm_b=math.nan) if i % 5 == 0 else r
        for i, r in enumerate(small)
    ]
    with threadpool_limits(limits=1):
        return nested_pack_study(data, folds=2, inner_folds=2, fit=_fast_fit)


def test_each_fold_uses_the_method_with_the_best_inner_accuracy(study: dict) -> None:  # type: ignore[type-arg]
    for fold in study["folds"]:
        inner = fold["inner_accuracy"]
        assert inner[fold["selected"]] == max(inner.values())
        assert fold["test_accuracy"]["selected"] == fold["test_accuracy"][fold["selected"]]


def test_accuracy_is_reported_over_all_pairs_and_over_the_pairs_that_ran(study: dict) -> None:  # type: ignore[type-arg]
    assert study["feasible_pairs"] < study["pairs"]
    # Infeasible pairs are never "pack", so leaving them out raises always-pack's score.
    assert study["always_pack"]["feasible_pairs"] > study["always_pack"]["all_pairs"]
    for name in ("rule", "rule_tuned", "stack", "direct", "selected"):
        acc = study["candidates"][name]
        assert 0.0 <= acc["all_pairs"] <= 1.0 and 0.0 <= acc["feasible_pairs"] <= 1.0

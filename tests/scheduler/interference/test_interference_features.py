"""Feature vectors and fingerprints of ordered job pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler.interference.datasets import PairRecord
from scheduler.interference.features import (
    FEATURE_NAMES,
    N_BASE,
    Fingerprints,
    gpu_spec,
    normalize_gpu_type,
    ordered_features,
    ordered_table,
)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA H200", "h200"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA GeForce RTX 3090", "rtx3090"),
        ("k80", "k80"),
    ],
)
def test_gpu_model_strings_map_to_known_specs(name: str, key: str) -> None:
    assert normalize_gpu_type(name) == key
    assert not math.isnan(gpu_spec(name)[0])


def test_pair_features_are_symmetric_and_job_features_swap() -> None:
    a = {"gpu_util": 80.0, "mem_util": 30.0, "gpu_memory_mib": 4096.0, "batch_size": 64.0}
    b = {"gpu_util": 20.0, "mem_util": 50.0, "gpu_memory_mib": 2048.0, "batch_size": 32.0}
    x = ordered_features([(a, b, "v100", "mps"), (b, a, "v100", "mps")], None)
    col = {n: i for i, n in enumerate(FEATURE_NAMES)}
    for name in ("util_sum", "util_prod", "mem_util_sum", "mem_frac_sum", "util_absdiff"):
        assert x[0, col[name]] == pytest.approx(x[1, col[name]])
    assert x[0, col["s_gpu_util"]] == x[1, col["o_gpu_util"]] == 80.0
    assert x[0, col["mem_frac_sum"]] == pytest.approx(6144.0 / (16 * 1024))
    assert x[0, col["mech_mps"]] == 1.0
    assert np.isnan(x[:, N_BASE:]).all()  # no fingerprints without a fitted table


def test_unknown_profile_values_are_missing_not_zero() -> None:
    x = ordered_features([({}, {}, "nonexistent-gpu", "")], None)
    assert np.isnan(x).all()


def test_fingerprints_say_how_much_a_job_suffers_and_how_much_it_hurts(records: list[PairRecord]) -> None:
    fp = Fingerprints.fit(records)
    jobs = {str(r.profile_a["job_key"]): float(r.profile_a["gpu_util"]) for r in records}
    light = min(jobs, key=lambda k: jobs[k])
    heavy = max(jobs, key=lambda k: jobs[k])
    sens_light, agg_light, _ = fp.lookup(light)
    sens_heavy, agg_heavy, _ = fp.lookup(heavy)
    assert sens_light > sens_heavy  # a light job keeps more of its speed
    assert agg_light > agg_heavy  # and its partners keep more of theirs
    assert np.isnan(fp.lookup("never-seen")).all()


def test_training_rows_never_see_their_own_family_pair_in_their_fingerprints(
    records: list[PairRecord],
) -> None:
    # Make one family pair extreme: if its rows leaked into their own fingerprints, sens would move.
    group = records[30].group
    changed = [
        PairRecord(r.dataset, r.gpu_type, r.profile_a, r.profile_b, r.feasible, 0.05, 0.05)
        if r.group == group
        else r
        for r in records
    ]
    rows = [2 * i for i, r in enumerate(records) if r.group == group]
    before = ordered_table(records, out_of_group=True).x[rows, N_BASE:]
    after = ordered_table(changed, out_of_group=True).x[rows, N_BASE:]
    assert np.allclose(before, after, equal_nan=True)
    in_sample = ordered_table(changed, Fingerprints.fit(changed)).x[rows, N_BASE:]
    assert not np.allclose(before, in_sample, equal_nan=True)

"""The composition rule for k > 2 jobs and the analytic fallback estimate."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.interference.composition import (
    CONTENTION,
    analytic_pair_throughput,
    compose_slowdowns,
    load_fractions,
    memory_fits,
)


def test_a_pair_keeps_its_pairwise_slowdowns() -> None:
    s = np.array([[1.0, 1.3], [1.7, 1.0]])
    assert compose_slowdowns(s).tolist() == pytest.approx([1.3, 1.7])


@pytest.mark.parametrize("k", [2, 3, 4, 6])
def test_k_saturating_jobs_share_the_gpu_in_turn_like_ideal_time_slicing(k: int) -> None:
    s = np.full((k, k), 2.0)
    assert compose_slowdowns(s) == pytest.approx(np.full(k, float(k)))


@given(st.lists(st.floats(1.0, 5.0), min_size=6, max_size=6))
def test_a_set_is_never_predicted_milder_than_its_worst_pair(values: list[float]) -> None:
    s = np.ones((3, 3))
    s[~np.eye(3, dtype=bool)] = values
    composed = compose_slowdowns(s)
    off = np.where(np.eye(3, dtype=bool), 1.0, s)
    assert np.all(composed >= off.max(axis=1) - 1e-12)


def test_two_light_jobs_only_pay_the_contention_cost() -> None:
    y = analytic_pair_throughput({"gpu_util": 30.0, "mem_util": 10.0}, {"gpu_util": 40.0, "mem_util": 20.0})
    assert y == pytest.approx(1.0 / (1.0 + CONTENTION))


def test_two_heavy_jobs_share_the_gpu_in_proportion_to_their_load() -> None:
    y = analytic_pair_throughput({"gpu_util": 90.0}, {"gpu_util": 70.0})
    assert y == pytest.approx(1.0 / 1.6 / (1.0 + CONTENTION))


def test_memory_bandwidth_can_be_the_bottleneck() -> None:
    y_mem = analytic_pair_throughput(
        {"gpu_util": 30.0, "mem_util": 80.0}, {"gpu_util": 30.0, "mem_util": 70.0}
    )
    y_sm = analytic_pair_throughput(
        {"gpu_util": 30.0, "mem_util": 10.0}, {"gpu_util": 30.0, "mem_util": 10.0}
    )
    assert y_mem < y_sm


def test_an_unprofiled_job_counts_as_its_declared_share_or_else_as_saturating() -> None:
    assert load_fractions({"gpu_share": 0.3}) == (0.3, 0.3)
    assert load_fractions({}) == (1.0, 1.0)


def test_memory_fit_needs_every_footprint_and_leaves_headroom() -> None:
    assert memory_fits([{"gpu_memory_mib": 4000.0}, {"gpu_memory_mib": 4000.0}], 16384) is True
    assert memory_fits([{"gpu_memory_mib": 8000.0}, {"gpu_memory_mib": 7000.0}], 16384) is False
    assert memory_fits([{"gpu_memory_mib": 1000.0}, {}], 16384) is None

"""Fixtures of the interference tests: one OpenMP thread, the synthetic records and a model fit on them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler.interference.datasets import PairRecord
from tests.scheduler.interference.interference_helpers import synthetic_records


@pytest.fixture(scope="session", autouse=True)
def _one_openmp_thread() -> Iterator[None]:
    """Gradient boosting on one OpenMP thread: on a shared, loaded machine a thread team per tree
    spins against other processes and made model fits here take minutes instead of seconds."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="session")
def records() -> list[PairRecord]:
    return synthetic_records()


@pytest.fixture(scope="session")
def trained_model(records: list[PairRecord]):  # type: ignore[no-untyped-def]
    from scheduler.interference.models import InterferenceModel

    return InterferenceModel.fit(records, estimator="gradient_boosting")

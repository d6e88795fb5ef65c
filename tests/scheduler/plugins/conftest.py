"""Fixtures of the plugin tests: an interference model fit on the synthetic co-location law."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler.interference.models import InterferenceModel
from tests.scheduler.interference.interference_helpers import synthetic_records


@pytest.fixture(scope="session")
def trained_model() -> Iterator[InterferenceModel]:
    # One OpenMP thread: a thread team per tree spins against other processes on a loaded machine.
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield InterferenceModel.fit(synthetic_records(), estimator="gradient_boosting")

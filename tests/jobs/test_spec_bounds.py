"""The integer bounds of a job spec are stated once (specs.INT_BOUNDS): the spec's validation and the
API's input serializer both take them, and the serializer's defaults are the spec's."""

from __future__ import annotations

import pytest

from jobs import specs
from jobs.serializers import JobCreateInput


@pytest.mark.parametrize("name", sorted(specs.INT_BOUNDS))
def test_the_serializer_accepts_exactly_the_specs_range(name: str) -> None:
    low, high = specs.INT_BOUNDS[name]
    field = JobCreateInput().fields[name]
    assert (field.min_value, field.max_value) == (low, high)
    assert field.default == specs.JobSpec.default_of(name)


@pytest.mark.parametrize("name", ["gpus", "replicas", "cpu_milli", "max_retries", "preemption_grace_seconds"])
def test_the_spec_refuses_one_past_either_end_with_the_range_in_the_message(name: str) -> None:
    low, high = specs.INT_BOUNDS[name]
    for value in (low - 1, high + 1):
        errors = specs.validate_job_spec(specs.JobSpec(command=["x"], **{name: value}))
        assert errors[name] == [f"Must be between {low} and {high}."]
    assert name not in specs.validate_job_spec(specs.JobSpec(command=["x"], **{name: high}))


def test_a_default_from_a_factory_is_a_fresh_value() -> None:
    assert specs.JobSpec.default_of("command") == [] and specs.JobSpec.default_of("command") is not (
        specs.JobSpec.default_of("command")
    )

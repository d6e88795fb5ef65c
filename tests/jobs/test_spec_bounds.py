"""The numeric bounds of a job spec are stated once (specs.BOUNDS): the spec's validation checks them,
and the API's input serializer is built from JobSpec and that table, with the spec's defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from rest_framework import serializers

from jobs import specs
from jobs.serializers import JobCreateInput


def _spec(name: str, value: Any) -> specs.JobSpec:
    fields: dict[str, Any] = {"command": ["x"], name: value}
    return specs.JobSpec(**fields)


@pytest.mark.parametrize("name", sorted(specs.BOUNDS))
def test_the_serializer_accepts_exactly_the_specs_range(name: str) -> None:
    low, high = specs.BOUNDS[name]
    field = JobCreateInput().fields[name]
    assert (field.min_value, field.max_value) == (low, high)
    assert field.default == specs.JobSpec.default_of(name)
    assert field.allow_null is (specs.JobSpec.default_of(name) is None)


@pytest.mark.parametrize("name", sorted(specs.BOUNDS))
def test_a_float_bound_makes_a_number_field_and_an_int_bound_an_integer_field(name: str) -> None:
    field = JobCreateInput().fields[name]
    expected = serializers.FloatField if name in specs.FLOAT_BOUNDS else serializers.IntegerField
    assert isinstance(field, expected)
    assert set(specs.INT_BOUNDS) | set(specs.FLOAT_BOUNDS) == set(specs.BOUNDS)


def test_the_input_has_every_spec_field_in_the_specs_order_and_the_request_parts_beside_them() -> None:
    names = list(JobCreateInput().fields)
    spec_names = [f.name for f in dataclasses.fields(specs.JobSpec)]
    assert [n for n in names if n not in ("team", "image", "gpu_request")] == spec_names
    assert names[:3] == ["name", "team", "image"]
    assert names[names.index("env") + 1] == "gpu_request"


@pytest.mark.parametrize("name", ["gpus", "replicas", "cpu_milli", "max_retries", "preemption_grace_seconds"])
def test_the_spec_refuses_one_past_either_end_with_the_range_in_the_message(name: str) -> None:
    low, high = specs.INT_BOUNDS[name]
    for value in (low - 1, high + 1):
        errors = specs.validate_job_spec(_spec(name, value))
        assert errors[name] == [f"Must be between {low} and {high}."]
    assert name not in specs.validate_job_spec(_spec(name, high))


@pytest.mark.parametrize("name", sorted(specs.FLOAT_BOUNDS))
def test_the_spec_and_the_serializer_agree_on_each_end_of_a_float_range(name: str) -> None:
    low, high = specs.FLOAT_BOUNDS[name]
    for value, ok in ((low, True), (high, True), (low * 0.999, False), (high * 1.001, False)):
        spec_errors = specs.validate_job_spec(_spec(name, value))
        shapes = JobCreateInput(data={name: value}, partial=True)
        assert (name not in spec_errors) is ok
        assert shapes.is_valid() is ok


def test_a_default_from_a_factory_is_a_fresh_value() -> None:
    assert specs.JobSpec.default_of("command") == [] and specs.JobSpec.default_of("command") is not (
        specs.JobSpec.default_of("command")
    )

"""The client's models and spec handling are kept in step with the server: its OpenAPI schema (read
over HTTP from a live server, as the client would) and the portal's YAML import."""

from __future__ import annotations

import types
import typing
from typing import Any

import pytest

from frontend import yaml_spec
from gpuctl import Client
from gpuctl import spec as client_spec
from gpuctl.errors import UsageError
from gpuctl.models import MODELS, SUBMIT_FIELDS, ApiModel

OPENAPI_TYPES = {
    "integer": int,
    "number": float,
    "string": str,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def _schema_type(prop: dict[str, Any], components: dict[str, Any]) -> tuple[set[type], bool]:
    """The Python types a property may hold, and whether it may be null."""
    nullable = bool(prop.get("nullable"))
    if "$ref" in prop:
        target = components[prop["$ref"].rsplit("/", 1)[1]]
        types_, inner_null = _schema_type(target, components)
        return types_, nullable or inner_null
    for key in ("allOf", "oneOf", "anyOf"):
        if key in prop:
            found: set[type] = set()
            for option in prop[key]:
                option_types, option_null = _schema_type(option, components)
                found |= option_types
                nullable = nullable or option_null
            return found, nullable
    if "enum" in prop and "type" not in prop:
        values = [v for v in prop["enum"] if v is not None]
        return {type(v) for v in values} or {str}, nullable or None in prop["enum"]
    if "type" not in prop:  # a free-form field (drf-spectacular's JSONField / ListField w/o child)
        return set(), nullable
    return {OPENAPI_TYPES[prop["type"]]}, nullable


def _python_type(model: type[ApiModel], name: str) -> tuple[set[type], bool]:
    hint = typing.get_type_hints(model)[name]
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    nullable = type(None) in args
    found = {typing.get_origin(a) or a for a in args if a is not type(None)}
    return found, nullable


@pytest.fixture
def schema(live_server: Any) -> dict[str, Any]:
    with Client(live_server.url) as client:
        return client.schema()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_client_model_has_exactly_the_fields_and_types_of_its_schema(
    schema: dict[str, Any], model: type[ApiModel]
) -> None:
    components = schema["components"]["schemas"]
    component = components[model.SCHEMA]
    properties = component["properties"]
    assert {f.name for f in model.api_fields()} == set(properties), (
        f"{model.__name__} differs from {model.SCHEMA}: add or remove fields in client/gpuctl/models.py"
    )
    for name, prop in properties.items():
        expected, expected_null = _schema_type(prop, components)
        actual, actual_null = _python_type(model, name)
        if expected:
            # int fits a "number"; every other type must match exactly.
            assert actual == expected or (expected == {float} and actual == {float}), (model.__name__, name)
        assert actual_null == expected_null, (
            f"{model.__name__}.{name}: nullable is {expected_null} in the schema"
        )


@pytest.mark.django_db(transaction=True)
def test_the_spec_fields_clone_copies_are_the_fields_submit_accepts(schema: dict[str, Any]) -> None:
    accepted = set(schema["components"]["schemas"]["JobCreateInput"]["properties"])
    # gpu_request is checked against gpus/gpu_milli and never stored, so a job has none to copy.
    assert set(SUBMIT_FIELDS) == accepted - {"gpu_request"}
    assert set(yaml_spec.FIELD_ORDER) <= accepted


YAML_CASES = [
    "",
    "gpus: 2\nreplicas: 2\nimage: pytorch:2.4\n",
    "command: [python, train.py\nreplicas: 2\n",
    "name: a\n  bad: indent\n",
    "- a list\n- not a mapping\n",
    "just text",
    "env:\n  A: '1'\n1: numeric key\n",
    "x" * (yaml_spec.MAX_YAML_CHARS + 1),
    "a: [1, 2\n",
]


@pytest.mark.parametrize("text", YAML_CASES, ids=range(len(YAML_CASES)))
def test_the_client_reads_job_yaml_exactly_as_the_portal_s_import(text: str) -> None:
    try:
        expected: Any = yaml_spec.parse_spec(text)
    except yaml_spec.YamlSpecError as exc:
        expected = ("error", str(exc))
    try:
        actual: Any = client_spec.parse_spec(text)
    except UsageError as exc:
        actual = ("error", exc.message)
    assert actual == expected


def test_set_overrides_fields_with_typed_values_and_env_as_text() -> None:
    spec = {"image": "pytorch:2.4", "gpus": 1, "env": {"A": "1"}}

    out = client_spec.apply_sets(
        spec, ["gpus=2", "replicas=2", "env.SEED=007", "command=false", "name=", "allow_sharing=true"]
    )

    assert out == {
        "image": "pytorch:2.4",
        "gpus": 2,
        "replicas": 2,
        "env": {"A": "1", "SEED": "007"},
        "command": "false",
        "allow_sharing": True,
    }
    assert spec["gpus"] == 1  # the input is left alone


@pytest.mark.parametrize("bad", ["gpus", "=2", "a..b=1", "resources.gpus=1"])
def test_a_malformed_set_is_a_usage_error_naming_it(bad: str) -> None:
    with pytest.raises(UsageError, match="--set"):
        client_spec.apply_sets({}, [bad])


def test_the_client_package_stands_alone_without_django() -> None:
    """`pip install ./client` must be enough: gpuctl imports nothing of the platform."""
    import subprocess
    import sys
    from pathlib import Path

    client_dir = Path(__file__).resolve().parents[2] / "client"
    code = (
        "import sys, gpuctl, gpuctl.cli; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'django', 'rest_framework', 'jobs', 'scheduler', 'config', 'accounts', 'frontend'}); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=client_dir,
        env={"PYTHONPATH": str(client_dir)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr

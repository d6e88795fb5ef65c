"""Job spec files: the YAML of the portal's import, which is the JSON body of ``POST /api/v1/jobs/``.

The rules about fields live in the API (one schema: a bad value or an unknown field comes back as a
400 with the field's message); here text becomes a mapping, with the line and column of a YAML
error. ``parse_spec`` behaves like the portal's (frontend/yaml_spec.py), which the client cannot
import (no Django here); tests/client keeps the two in step.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from gpuctl.errors import UsageError

MAX_YAML_CHARS = 64_000
# Fields whose --set value is taken as typed: `--set command=false` runs `false`, it is not a boolean.
TEXT_FIELDS = frozenset({"name", "command"})


class SpecError(UsageError):
    """The text is not a YAML mapping, or a ``--set`` is malformed; the message says where."""


def parse_spec(text: str) -> dict[str, Any]:
    if len(text) > MAX_YAML_CHARS:
        raise SpecError(f"The YAML may have at most {MAX_YAML_CHARS} characters.")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise SpecError(f"{problem}{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError("The YAML must be a mapping of field names to values, e.g. 'gpu_milli: 250'.")
    return {str(key): value for key, value in data.items()}


def load_spec_file(path: str, text: str) -> dict[str, Any]:
    try:
        return parse_spec(text)
    except SpecError as exc:
        raise SpecError(f"{path}: {exc.message}") from None


def _scalar(text: str) -> Any:
    """A ``--set`` value read as YAML (``2`` is a number, ``true`` a boolean, ``[a, b]`` a list), or
    the text itself when it is not valid YAML."""
    try:
        return yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        return text


def apply_sets(spec: dict[str, Any], assignments: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``spec`` with each ``key=value`` applied; ``env.NAME=value`` sets one variable (env values
    stay strings, as do ``name`` and ``command``). ``key=`` with nothing after removes the key."""
    out = copy.deepcopy(spec)
    for item in assignments:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SpecError(f"--set {item!r}: give key=value, e.g. --set gpus=2 or --set env.SEED=1")
        path = key.split(".")
        if any(not part for part in path):
            raise SpecError(f"--set {item!r}: {key!r} is not a field name")
        if path[0] == "env" and len(path) == 2:
            env = out.get("env") or {}
            if not isinstance(env, dict):
                raise SpecError(f"--set {item!r}: env in the spec is not a mapping")
            env[path[1]] = raw
            out["env"] = env
            continue
        if len(path) > 1:
            raise SpecError(f"--set {item!r}: only env.NAME may be nested")
        if raw == "":
            out.pop(key, None)
        else:
            out[key] = raw if key in TEXT_FIELDS else _scalar(raw)
    return out

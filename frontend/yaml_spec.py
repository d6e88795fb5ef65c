"""YAML <-> job spec for the submit form's YAML view. PyYAML's safe loader only: no Python objects.

The YAML document is the same mapping the REST API takes (``POST /api/v1/jobs/``); checking the
fields is jobs.validation's job (the portal sends the mapping to ``POST /api/v1/jobs/validate/``), so
this module only turns text into a mapping and back, within bounds of size and nesting.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_YAML_CHARS = 64_000
# As deep as the API lets JSON nest (settings.API_MAX_JSON_DEPTH); a job spec needs 3.
MAX_YAML_DEPTH = 32
# The order a person would read a spec in; unknown keys follow in their own order.
FIELD_ORDER = (
    "name",
    "team",
    "image",
    "command",
    "args",
    "gpus",
    "gpu_milli",
    "gpu_memory_mib",
    "gpu_models",
    "replicas",
    "priority",
    "cpu_milli",
    "memory_mib",
    "max_runtime_seconds",
    "max_retries",
    "slowdown_tolerance",
    "sim_duration_seconds",
    "preemptible",
    "min_runtime_seconds",
    "preemption_grace_seconds",
    "allow_sharing",
    "env",
)


class YamlSpecError(ValueError):
    """The text is not a YAML mapping; the message says where."""


def _check_shape(text: str) -> None:
    """Refuse nesting deeper than MAX_YAML_DEPTH and aliases before building anything: PyYAML builds
    nested nodes recursively (a deep document would raise RecursionError), and an alias repeats a
    whole subtree (a few lines can expand to gigabytes of JSON)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise YamlSpecError("YAML aliases (*name) are not accepted in a job spec; write the value out.")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                line = f" (line {event.start_mark.line + 1})" if event.start_mark is not None else ""
                raise YamlSpecError(
                    f"The YAML nests deeper than {MAX_YAML_DEPTH} levels{line}; a job spec needs three."
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def parse_spec(text: str) -> dict[str, Any]:
    if len(text) > MAX_YAML_CHARS:
        raise YamlSpecError(f"The YAML may have at most {MAX_YAML_CHARS} characters.")
    try:
        _check_shape(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise YamlSpecError(f"{problem}{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise YamlSpecError("The YAML must be a mapping of field names to values, e.g. 'gpu_milli: 250'.")
    return {str(key): value for key, value in data.items()}


def dump_spec(spec: dict[str, Any]) -> str:
    """``spec`` as block-style YAML, known fields first, empty values left out."""
    ordered = {key: spec[key] for key in FIELD_ORDER if key in spec}
    ordered.update({key: value for key, value in spec.items() if key not in ordered})
    kept = {k: v for k, v in ordered.items() if v not in (None, "", [], {})}
    return yaml.safe_dump(kept, sort_keys=False, default_flow_style=False, allow_unicode=True)

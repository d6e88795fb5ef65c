"""drf-spectacular hooks that document answers every operation can give but no view declares."""

from __future__ import annotations

from typing import Any

_ERROR_REF = {"$ref": "#/components/schemas/Error"}
_METHODS = ("get", "put", "post", "patch", "delete")

# Added to every operation that lacks them: any request can be throttled (accounts.throttles),
# malformed before its view runs (a body nested too deep, an unparsable body), or ask for a page past
# the last one (DRF's pagination answers 404).
_COMMON = {
    "400": "Malformed request (for example a body that is not JSON or nests too deep).",
    "404": "Not found: an id you cannot see, or a page past the last one.",
    "429": "Too many requests: wait the seconds in the Retry-After header.",
}


def add_common_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> Any:
    """Postprocessing hook: document 400, 404 and 429 in the one error shape on every operation."""
    if "Error" not in result.get("components", {}).get("schemas", {}):
        return result
    for path_item in result.get("paths", {}).values():
        for method in _METHODS:
            operation = path_item.get(method)
            if operation is None:
                continue
            responses = operation.setdefault("responses", {})
            for code, description in _COMMON.items():
                responses.setdefault(
                    code,
                    {"content": {"application/json": {"schema": _ERROR_REF}}, "description": description},
                )
    return result

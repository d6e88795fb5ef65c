"""drf-spectacular hooks that document answers every operation can give but no view declares."""

from __future__ import annotations

from typing import Any

_METHODS = ("get", "put", "post", "patch", "delete")

# Any request can be malformed before its view runs (a query parameter of the wrong type, a body
# nested too deep), ask for a page past the last one or an id it cannot see (404), or be throttled.
_EVERY = {
    "400": "Invalid input: the fields and their messages are in extra.fields.",
    "404": "Not found: an id you cannot see, or a page past the last one.",
    "429": "Too many requests: wait the seconds in the Retry-After header.",
}
_SIGNED_IN = {
    "401": "No valid credentials (a missing, expired or revoked token).",
    "403": "Signed in but not allowed (for example a viewer asking to change something).",
}
_WITH_BODY = {"415": "The body is not JSON (the API reads application/json only)."}


def _error_response(description: str) -> dict[str, Any]:
    return {
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        "description": description,
    }


def add_common_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> Any:
    """Postprocessing hook: document those answers in the one error shape on every operation."""
    if "Error" not in result.get("components", {}).get("schemas", {}):
        return result
    default_security = result.get("security")
    for path_item in result.get("paths", {}).values():
        for method in _METHODS:
            operation = path_item.get(method)
            if operation is None:
                continue
            common = dict(_EVERY)
            security = operation.get("security", default_security)
            # drf-spectacular writes [{}] (or nothing) for an operation anyone may call.
            if security and any(requirement for requirement in security):
                common.update(_SIGNED_IN)
            if "requestBody" in operation:
                common.update(_WITH_BODY)
            responses = operation.setdefault("responses", {})
            for code, description in common.items():
                responses.setdefault(code, _error_response(description))
    return result

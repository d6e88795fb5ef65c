"""Errors of the client, each with the exit code the command line gives it.

| code | meaning |
|---|---|
| 0 | success (``wait``: the job SUCCEEDED) |
| 1 | an unexpected error inside gpuctl (reported in one line, never a traceback) |
| 2 | usage: a bad option, a bad YAML file, or a spec the API refused as invalid (HTTP 400) |
| 3 | not found: no such job (or not one of your teams'), HTTP 404 |
| 4 | refused: not signed in or not allowed (HTTP 401/403), or a conflict (409, 429) |
| 5 | server: the API failed (HTTP 5xx) or answered something that is not its API |
| 6 | network: the server could not be reached, or did not answer in time |

``wait`` (and ``submit --wait``) add one code per way a job can end other than success; see
``WAIT_EXIT_CODES``.
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_REFUSED = 4
EXIT_SERVER = 5
EXIT_NETWORK = 6

# How a job ended -> the exit code of `gpuctl wait`. Far from 2-6 so a script can tell "the job
# failed" from "gpuctl could not find out".
WAIT_EXIT_CODES: dict[str, int] = {
    "SUCCEEDED": 0,
    "USER": 10,
    "OOM": 11,
    "TIMEOUT": 12,
    "IMAGE": 13,
    "PLATFORM": 14,
    "HARDWARE": 15,
    "FAILED": 16,  # FAILED without a category (should not happen; kept distinct)
    "STOPPED": 17,
}
EXIT_WAIT_TIMEOUT = 18  # `wait --timeout` ran out while the job was still going


def wait_exit_code(status: str, failure_category: str = "") -> int:
    """The exit code for a job that ended with ``status`` (and ``failure_category`` when FAILED)."""
    if status == "FAILED":
        return WAIT_EXIT_CODES.get(failure_category or "FAILED", WAIT_EXIT_CODES["FAILED"])
    return WAIT_EXIT_CODES.get(status, EXIT_INTERNAL)


class GpuctlError(Exception):
    """Base of every error the client raises; ``exit_code`` is what the command line exits with."""

    exit_code = EXIT_INTERNAL

    def __init__(self, message: str, *, status: int | None = None, code: str = "", extra: Any = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.extra = extra if extra is not None else {}


class UsageError(GpuctlError):
    exit_code = EXIT_USAGE


class NotFoundError(GpuctlError):
    exit_code = EXIT_NOT_FOUND


class RefusedError(GpuctlError):
    exit_code = EXIT_REFUSED


class ServerError(GpuctlError):
    exit_code = EXIT_SERVER


class NetworkError(GpuctlError):
    exit_code = EXIT_NETWORK


class WaitTimeout(GpuctlError):
    exit_code = EXIT_WAIT_TIMEOUT


def _field_errors(extra: Any, prefix: str = "") -> list[str]:
    """``{"gpus": ["Ensure ..."], "env": {"A": ["..."]}}`` -> ``["gpus: Ensure ...", "env.A: ..."]``."""
    if isinstance(extra, dict):
        fields = extra.get("fields", extra)
        out: list[str] = []
        if not isinstance(fields, dict):
            return out
        for key, value in fields.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict):
                out.extend(_field_errors(value, f"{name}."))
            elif isinstance(value, list):
                texts = [str(v) for v in value if not isinstance(v, dict | list)]
                nested = [item for item in value if isinstance(item, dict | list)]
                if texts:
                    out.append(f"{name}: {' '.join(texts)}")
                for i, item in enumerate(nested):
                    out.extend(_field_errors(item, f"{name}[{i}]."))
            else:
                out.append(f"{name}: {value}")
        return out
    return []


def from_response(status: int, body: Any) -> GpuctlError:
    """The error for an HTTP answer ``status`` whose JSON body is ``body`` (the API's error shape
    ``{"message", "code", "extra"}``, or anything else from a proxy)."""
    message, code = "", ""
    extra: Any = {}
    if isinstance(body, dict):
        message = str(body.get("message") or body.get("detail") or "")
        code = str(body.get("code") or "")
        extra = body.get("extra") or {}
    fields = _field_errors(extra)
    if fields:
        # The API's summary of a 400 only names the fields ("Invalid input: gpus."); say what is wrong.
        lead = "Invalid input" if not message or message.startswith("Invalid input") else message.rstrip(".")
        message = f"{lead}: " + "; ".join(fields)
    message = message or f"HTTP {status}"
    kwargs: dict[str, Any] = {"status": status, "code": code, "extra": extra}
    if status == 400:
        return UsageError(message, **kwargs)
    if status == 404:
        return NotFoundError(message, **kwargs)
    if status in (401, 403, 405, 409, 429):
        return RefusedError(message, **kwargs)
    if status >= 500:
        return ServerError(message, **kwargs)
    return GpuctlError(message, **kwargs)

"""Live logs: ``GET /api/v1/jobs/{id}/logs/?follow=1&since=OFFSETS`` as server-sent events.

Backends only offer the whole captured output of a task (``ClusterBackend.logs``), so following is
done here, the same way for every backend: read each task's output again every
``LOGS_FOLLOW_POLL_SECONDS``, send what lies past the offset already sent, and stop when the job has
ended (one last read first, so the final lines are never lost). Offsets count characters of a task's
output, per task index.

The stream (``text/event-stream``) carries three events:

- ``log``: ``{"task", "index", "offset", "text", "reset"}``, ``text`` being the output from ``offset``
  on; ``reset`` is true when the output became shorter than what was sent (a new run of the task
  started over), and ``offset`` is then 0. Its SSE ``id`` is the offsets so far (``0:120,1:40``), so
  a browser's EventSource resumes where it stopped through ``Last-Event-ID``;
- ``end``: ``{"status", "failure_category", "offsets"}``: the job has ended, nothing will follow;
- ``timeout``: ``{"offsets"}``: the request reached ``LOGS_FOLLOW_MAX_SECONDS`` and the job still
  runs; the client connects again with ``since`` set to those offsets. The bound keeps one follower
  from holding a web worker for longer than the server's worker timeout.

A comment line (``: keep-alive``) goes out after ``LOGS_FOLLOW_KEEPALIVE_SECONDS`` without output, so
proxies do not drop an idle connection.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer

from jobs import specs
from jobs.models import Job

FINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
MAX_OFFSET = 2**53  # far beyond any captured output; bounds what a caller may send


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


class EventStreamRenderer(BaseRenderer):
    """Lets DRF's content negotiation accept ``Accept: text/event-stream`` (EventSource sends it).
    Only error answers go through it (the stream itself is a StreamingHttpResponse); they stay
    JSON, in the API's one error shape."""

    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        if renderer_context and renderer_context.get("response") is not None:
            renderer_context["response"]["Content-Type"] = "application/json"
        return json.dumps(data).encode()


def parse_offsets(text: str) -> dict[int, int]:
    """``"120"`` (every task from 120) is ``{-1: 120}``; ``"0:120,1:40"`` is per task index.

    Raises ValueError with a message for the caller."""
    text = text.strip()
    if not text:
        return {}
    if ":" not in text and "," not in text:
        return {-1: _offset(text)}
    offsets: dict[int, int] = {}
    for part in text.split(","):
        index, sep, value = part.partition(":")
        if not sep:
            raise ValueError("Give one offset, or index:offset pairs separated by commas (0:120,1:40).")
        try:
            task = int(index)
        except ValueError:
            raise ValueError(f"{index!r} is not a task index.") from None
        if not 0 <= task <= specs.MAX_REPLICAS:
            raise ValueError(f"Task index {task} is out of range.")
        offsets[task] = _offset(value)
    return offsets


def _offset(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a whole number of characters.") from None
    if not 0 <= number <= MAX_OFFSET:
        raise ValueError("An offset is a whole number of characters, 0 or more.")
    return number


def format_offsets(offsets: dict[int, int]) -> str:
    return ",".join(f"{index}:{offset}" for index, offset in sorted(offsets.items()) if index >= 0)


# The schema of one event of the stream (OpenAPI describes a text/event-stream answer by its events,
# the way schemathesis checks them): ``data`` is the JSON of the payloads described above.
EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["log", "end", "timeout"]},
        "data": {
            "type": "string",
            "description": 'JSON. log: {"task", "index", "offset", "text", "reset"}; end: {"status", '
            '"failure_category", "offsets"}; timeout: {"offsets"}',
        },
        "id": {"type": "string", "description": "Offsets so far, per task index: 0:120,1:40."},
        "retry": {"type": "integer", "description": "Milliseconds before reconnecting."},
    },
}


class OffsetsField(serializers.CharField):
    def to_internal_value(self, data: Any) -> dict[int, int]:  # type: ignore[override]
        text = super().to_internal_value(data)
        try:
            return parse_offsets(text)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


class LogsFollowQuery(serializers.Serializer):
    """Query parameters of the logs endpoint: ``task``, ``since``, ``follow``."""

    task = serializers.IntegerField(
        min_value=0, max_value=specs.MAX_REPLICAS, required=False, help_text="Only this task index."
    )
    since = OffsetsField(
        required=False,
        allow_blank=True,
        max_length=8 * (specs.MAX_REPLICAS + 1) * 2,
        help_text="Characters already received: one offset for every task, or index:offset pairs "
        "(0:120,1:40).",
    )
    follow = serializers.BooleanField(
        required=False, default=False, help_text="Stream new output as server-sent events until the job ends."
    )


def _job_status(job: Job) -> tuple[str, str]:
    status, category = Job.objects.filter(pk=job.pk).values_list("status", "failure_category").get()
    return str(status), str(category)


def _sse(event: str, data: dict[str, Any], event_id: str | None = None) -> str:
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return "\n".join(lines) + "\n\n"


def slice_logs(tasks: list[dict[str, Any]], since: dict[int, int]) -> list[dict[str, Any]]:
    """The non-following answer: each task's log from its offset on (all of it when the output
    became shorter than the offset)."""
    sliced = []
    for task in tasks:
        offset = since.get(task["index"], since.get(-1, 0))
        log = task["log"]
        sliced.append({**task, "log": log[offset:] if offset <= len(log) else log})
    return sliced


def release_pooled_connection(wrapper: BaseDatabaseWrapper | None = None) -> None:
    """Hand ``wrapper``'s connection back to its pool while a follower waits for the next poll.

    A follow lasts up to ``LOGS_FOLLOW_MAX_SECONDS``; holding a pooled connection all that time would
    let a few followers drain a web process's pool (``DATABASE_POOL_MAX_SIZE``) and make every other
    request wait for one. Without a pool nothing is done: closing would open a new server backend at
    every poll. Inside a transaction (a test's) the connection is kept: closing it would end it.
    """
    wrapper = wrapper or connections[DEFAULT_DB_ALIAS]
    if wrapper.settings_dict.get("OPTIONS", {}).get("pool") and not wrapper.in_atomic_block:
        wrapper.close()


def follow_events(
    *,
    job: Job,
    task_index: int | None,
    since: dict[int, int],
    read_logs: Callable[[Job, int | None], list[dict[str, Any]]],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    status_of: Callable[[Job], tuple[str, str]] | None = None,
    release: Callable[[], None] = release_pooled_connection,
) -> Iterator[str]:
    """The SSE stream of ``job``'s output; ``read_logs(job, task_index)`` is the selector's read."""
    poll = max(0.05, _setting("LOGS_FOLLOW_POLL_SECONDS", 1.0))
    keepalive = max(poll, _setting("LOGS_FOLLOW_KEEPALIVE_SECONDS", 15.0))
    deadline = clock() + max(poll, _setting("LOGS_FOLLOW_MAX_SECONDS", 30.0))
    default = since.get(-1, 0)
    offsets: dict[int, int] = {k: v for k, v in since.items() if k >= 0}
    # Tells proxies and browsers at once that the stream is open, and how soon to reconnect.
    yield f"retry: {int(poll * 1000)}\n\n"
    last_sent = clock()
    status, category = "", ""
    while True:
        # A busy database (SQLite while a writer holds the table) must not end a follow with a 500:
        # keep the last status read and ask again at the next poll.
        with contextlib.suppress(OperationalError):
            status, category = (status_of or _job_status)(job)
        ended = status in FINAL
        try:
            tasks = read_logs(job, task_index)
        except Exception as exc:  # noqa: BLE001 (a backend hiccup must not end a follow with a 500)
            tasks = []
            yield ": backend unavailable: " + str(exc).replace("\n", " ")[:200] + "\n\n"
        for task in tasks:
            index, text = task["index"], task["log"]
            offset = offsets.get(index, default)
            reset = False
            if len(text) < offset:
                if not text:
                    continue  # the task is gone from the backend: nothing new, keep the offset
                offset, reset = 0, True
            if len(text) == offset:
                offsets.setdefault(index, offset)
                continue
            offsets[index] = len(text)
            payload = {
                "task": task["task"],
                "index": index,
                "offset": offset,
                "text": text[offset:],
                "reset": reset,
            }
            yield _sse("log", payload, format_offsets(offsets))
            last_sent = clock()
        if ended:
            end = {"status": status, "failure_category": category, "offsets": format_offsets(offsets)}
            yield _sse("end", end)
            return
        if clock() >= deadline:
            yield _sse("timeout", {"offsets": format_offsets(offsets)})
            return
        if clock() - last_sent >= keepalive:
            yield ": keep-alive\n\n"
            last_sent = clock()
        release()
        sleep(poll)


RENDERERS = [JSONRenderer, EventStreamRenderer]

"""Browser pages are closed before the test database is flushed.

A page left open keeps polling the live server (the dashboard and the queue refresh themselves), so
its requests read the tables while pytest-django's flush truncates them; PostgreSQL then sees the
two lock orders cross and aborts one with a deadlock. Closing every browser context of the test
first, then waiting for the requests the live server is still answering, leaves the flush alone with
the database: a closed page's last request can still be running in its server thread.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType

import pytest


@pytest.fixture(autouse=True)
def _browser_pages_closed_before_the_flush(request: pytest.FixtureRequest) -> Iterator[None]:
    if "browser" not in request.fixturenames or "live_server" not in request.fixturenames:
        yield
        return
    # Requested here so that the database is set up first and flushed after this teardown.
    request.getfixturevalue("transactional_db")
    browser = request.getfixturevalue("browser")
    yield
    for context in list(browser.contexts):
        context.close()
    _requests_in_flight_answered()


def _requests_in_flight_answered(timeout_s: float = 5.0) -> None:
    """Wait until no live-server thread is inside Django's handler (a view reading the tables). A
    thread idle on a kept-alive connection, or between the chunks of a streamed body (a log follow
    waits there with no transaction open), is not waited for; a view still running after
    ``timeout_s`` is left to run."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_in_request(frame) for frame in _other_threads_frames()):
        time.sleep(0.02)


def _other_threads_frames() -> list[FrameType]:
    me = threading.get_ident()
    return [frame for ident, frame in sys._current_frames().items() if ident != me]


def _in_request(frame: FrameType | None) -> bool:
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__call__" and code.co_filename.endswith(
            os.path.join("django", "core", "handlers", "wsgi.py")
        ):
            return True
        frame = frame.f_back
    return False

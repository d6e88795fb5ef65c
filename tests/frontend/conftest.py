"""Browser pages are closed before the test database is flushed.

A page left open keeps polling the live server (the dashboard and the queue refresh themselves), so
its requests read the tables while pytest-django's flush truncates them; PostgreSQL then sees the
two lock orders cross and aborts one with a deadlock. Closing every browser context of the test
first leaves the flush alone with the database.
"""

from __future__ import annotations

from collections.abc import Iterator

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

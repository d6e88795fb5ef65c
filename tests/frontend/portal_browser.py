"""Browser helpers of the portal's page tests: Debian's Chromium through Playwright against
pytest-django's live server, a console-error watcher, and the simulated cluster on a fake clock that
the web pages and the test share (the test runs cycles, binds and syncs itself, as no worker runs).

Import the fixtures into a test module with ``from tests.frontend.portal_browser import browser, sim``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Playwright's sync API runs an event loop in this thread; the ORM calls between browser steps are
# still synchronous and safe (Django's check cannot tell them apart).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = Path(
    os.environ.get("PORTAL_SCREENSHOT_DIR", Path(__file__).resolve().parents[2] / "docs" / "screenshots")
)
LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not (Path(CHROMIUM).exists() or shutil.which("chromium")),
        reason=f"Chromium not found at {CHROMIUM}: install Debian's chromium (make browser) to run browser tests",
    ),
]


def browser_test(test: Any) -> Any:
    """Marks a test as a browser test (``-m browser``), skipped where Chromium is missing."""
    for mark in BROWSER_MARKS:
        test = mark(test)
    return test


def sync_api() -> Any:
    return pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


class FakeClock:
    """Simulated-cluster time, moved by the test (starts at the real time, so dates look right)."""

    def __init__(self) -> None:
        self.t = time.time()

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api().sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=shutil.which("chromium") or CHROMIUM, args=ARGS)
        yield instance
        instance.close()


@dataclass
class Sim:
    backend: Any
    clock: FakeClock


@pytest.fixture
def sim(tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Sim:
    """The demo cluster (4 DGX-1 + 4 T4 nodes) on a fake clock, used by the web pages and the test."""
    from scheduler.backends.simulated import SimulatedBackend

    clock = FakeClock()
    backend = SimulatedBackend(tmp_path / "cluster.json", cluster="demo", time_scale=1.0, clock=clock)
    settings.CACHES = {
        **settings.CACHES,  # other aliases (the throttle cache) stay
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": str(tmp_path)},
    }
    for module in ("jobs.cluster", "jobs.scheduling", "jobs.binding", "jobs.sync"):
        monkeypatch.setattr(f"{module}.get_backend", lambda name=None: backend)
    monkeypatch.setattr("jobs.dispatch._enqueue", lambda *args: None)
    return Sim(backend=backend, clock=clock)


def run_cluster(sim: Sim, seconds: float = 0.0) -> None:
    """One round of the runtime: schedule, bind what was admitted, let time pass, sync phases."""
    from jobs import binding, scheduling, sync
    from jobs.models import Job

    scheduling.run_scheduling_cycle(backend=sim.backend)
    for job_id in Job.objects.filter(status="ADMITTED").values_list("pk", flat=True):
        binding.job_bind(job_id=job_id, backend=sim.backend)
    sim.clock.advance(seconds)
    sync.sync_status(backend=sim.backend)


class Console:
    """Console errors and uncaught exceptions of every page of a browser context."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def watch(self, page: Any) -> Any:
        page.on(
            "console", lambda m: self.errors.append(f"{page.url}: {m.text}") if m.type == "error" else None
        )
        page.on("pageerror", lambda e: self.errors.append(f"{page.url}: uncaught {e}"))
        return page


def new_page(browser: Any, console: Console, viewport: dict[str, int] = LAPTOP) -> Any:
    page = browser.new_context(viewport=viewport, accept_downloads=True).new_page()
    page.set_default_timeout(15_000)
    return console.watch(page)


def log_in(page: Any, base: str, username: str, then: str = "/") -> None:
    """Sign in through the form and land on ``then`` (each test watches the pages it is about)."""
    page.goto(f"{base}/login/?next={then}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(f"{username}-password-1")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}{then}")


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


def no_horizontal_overflow(page: Any) -> bool:
    return bool(
        page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    )


def unlabelled_controls(page: Any) -> list[str]:
    """Visible form controls without an accessible name (label, aria-label or aria-labelledby)."""
    return list(
        page.evaluate(
            """() => Array.from(document.querySelectorAll('input, select, textarea'))
                .filter(e => e.type !== 'hidden' && e.offsetParent !== null)
                .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')
                             && !e.getAttribute('aria-labelledby'))
                .map(e => e.name || e.id)"""
        )
    )


def wider_than_the_screen(page: Any) -> list[str]:
    """The elements that reach past the right edge of the viewport (what makes a page scroll sideways)."""
    return list(
        page.evaluate(
            """() => Array.from(document.querySelectorAll('body *'))
                .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
                .slice(0, 8).map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))
                .concat([document.documentElement.scrollWidth, document.documentElement.clientWidth])"""
        )
    )


def check_phone_width(browser: Any, console: Console, base: str, username: str, paths: list[str]) -> None:
    """Every page of ``paths`` fits a 390 px wide phone without sideways scrolling."""
    phone = new_page(browser, console, PHONE)
    log_in(phone, base, username, then=paths[0])
    for path in paths:
        phone.goto(f"{base}{path}")
        phone.wait_for_load_state("networkidle")
        assert no_horizontal_overflow(phone), (path, wider_than_the_screen(phone))
    phone.context.close()

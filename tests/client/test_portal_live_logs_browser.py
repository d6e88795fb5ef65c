"""The portal's job page shows a job's output live, from the logs stream (server-sent events),
instead of polling whole logs: real headless Chromium (Debian's package) against the live server."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.client.conftest import DB_LOCK, Platform

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's loop runs in this thread
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not (Path(CHROMIUM).exists() or shutil.which("chromium")),
        reason=f"Chromium not found at {CHROMIUM}: install Debian's chromium (make browser) to run browser tests",
    ),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def test_the_job_page_streams_the_log_while_the_job_runs(
    platform: Platform, member: Any, image: Any, token_of: Any
) -> None:
    from jobs.models import Job

    with DB_LOCK:
        token = token_of(member)
    spec = platform.home / "job.yaml"
    # An hour at 300x, 12 s of real time; the simulated log has one line a minute for 20 minutes.
    spec.write_text(
        f"image: {image.reference}\ncommand: python train.py\ngpu_milli: 500\nsim_duration_seconds: 3600\n"
    )
    job_id = int(platform.gpuctl("submit", "-f", str(spec), "-q", token=token, drive=False).stdout)
    requests: list[str] = []
    errors: list[str] = []
    seen_running: list[str] = []

    with sync_api.sync_playwright() as playwright, contextlib.ExitStack() as stack:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium") or CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.set_default_timeout(30_000)
        page.on("request", lambda r: requests.append(r.url) if "/logs/" in r.url else None)
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{platform.url}/login/")
        page.get_by_label("Username").fill(member.username)
        page.get_by_label("Password").fill(f"{member.username}-password-1")
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{platform.url}/")
        page.goto(f"{platform.url}/jobs/{job_id}/")
        sync_api.expect(page.locator("#job-status")).to_have_text("QUEUED")
        stack.enter_context(platform.driving())  # the job starts only now that the page watches it

        sync_api.expect(page.locator("#job-logs")).to_contain_text("training step", timeout=30_000)
        with DB_LOCK:
            seen_running.append(Job.objects.get(pk=job_id).status)
        sync_api.expect(page.locator("#job-logs")).to_contain_text("exited with code 0", timeout=30_000)
        sync_api.expect(page.locator("#logs-note")).to_contain_text("The job has ended")
        text = page.locator("#job-logs").inner_text()
        time.sleep(0.5)
        browser.close()

    assert seen_running == ["RUNNING"]  # output was on the page before the job ended
    assert [f"training step {n * 100}" in text for n in range(1, 21)] == [True] * 20
    assert text.count("exited with code 0") == 1  # reconnects (1 s bound here) repeated nothing
    assert requests and all("follow=1" in url for url in requests), requests
    assert errors == [], errors

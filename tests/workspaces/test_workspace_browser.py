"""In a real Chromium: the portal's Open button of a running JupyterLab workspace opens JupyterLab
through the platform's proxy (served by uvicorn, as make run serves it)."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import httpx
import pytest

from tests.frontend.portal_browser import browser, browser_test  # noqa: F401  (fixture)
from tests.jobs.runtime_fixtures import image, researcher, team  # noqa: F401  (fixtures)
from tests.workspaces.test_jupyterlab_workspace import (  # noqa: F401  (fixtures)
    _session_cookie,
    _start_workspace,
    _wait_served,
    local,
    platform_url,
)

pytest.importorskip("jupyterlab", reason="JupyterLab is a test dependency (requirements.lock)")
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


@browser_test
def test_open_on_the_job_page_shows_jupyterlab(browser, local, platform_url, researcher, image) -> None:
    researcher.set_password("ada-password-1")
    researcher.save()
    job = _start_workspace(researcher, image, local)
    with httpx.Client(cookies=_session_cookie(researcher), timeout=30) as client:
        _wait_served(client, f"{platform_url}/workspaces/{job.pk}/api/status")
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{platform_url}/login/?next=/jobs/{job.pk}/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("ada-password-1")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{platform_url}/jobs/{job.pk}/")

    with context.expect_page() as opened:
        page.get_by_role("link", name="Open").click()
    lab = opened.value
    lab.wait_for_load_state()

    assert lab.url == f"{platform_url}/workspaces/{job.pk}/lab"
    lab.wait_for_function("() => document.title.includes('JupyterLab')", timeout=60_000)
    context.close()

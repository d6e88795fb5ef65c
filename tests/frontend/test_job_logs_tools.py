"""The job page's log tools: the log as a plain-text download (access checked like the page: another
team's job is a 404) and a search within the shown log that highlights and steps through matches."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from jobs.services import job_submit
from jobs.specs import JobSpec
from tests.frontend import portal_browser
from tests.frontend.portal_browser import (
    PHONE,
    Console,
    Sim,
    browser_test,
    log_in,
    new_page,
    no_horizontal_overflow,
    run_cluster,
    shot,
    sync_api,
)

browser = portal_browser.browser  # the module's Chromium (a fixture)
sim = portal_browser.sim


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _finished_job(sim: Sim, member: Any, team: Any, image: Any, **spec: Any) -> Any:
    values: dict[str, Any] = {"name": "echo", "command": ["python", "train.py", "--epochs", "2"]}
    values.update(spec)
    job = job_submit(
        user=member, spec=JobSpec(gpu_milli=250, sim_duration_seconds=5, **values), image=image, team=team
    )
    run_cluster(sim, seconds=13)
    run_cluster(sim, seconds=10)
    job.refresh_from_db()
    assert job.status == "SUCCEEDED"
    return job


@pytest.mark.django_db
def test_the_log_download_is_the_jobs_output_as_an_attachment_for_its_team_only(
    sim: Sim, member: Any, viewer: Any, outsider: Any, team: Any, image: Any
) -> None:
    job = _finished_job(sim, member, team, image, replicas=2)
    response = _client(viewer).get(f"/jobs/{job.pk}/logs.txt")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="job-{job.pk}-logs.txt"'
    text = response.content.decode()
    logs = sim.backend
    for task in job.tasks.order_by("index"):
        assert f"== {task.name} (" in text
        assert logs.logs(str(job.pk), task.name) in text
    one = _client(viewer).get(f"/jobs/{job.pk}/logs.txt?task=1")
    first = job.tasks.get(index=1)
    assert one.content.decode() == logs.logs(str(job.pk), first.name)
    assert one["Content-Disposition"] == f'attachment; filename="job-{job.pk}-task-1-logs.txt"'
    for bad in ("x", "65", "-1", "²", "1" * 20):
        assert _client(viewer).get(f"/jobs/{job.pk}/logs.txt?task={bad}").status_code == 400, bad
    assert _client(outsider).get(f"/jobs/{job.pk}/logs.txt").status_code == 404
    assert Client().get(f"/jobs/{job.pk}/logs.txt").status_code == 302


@browser_test
@pytest.mark.django_db(transaction=True)
def test_a_researcher_searches_the_log_and_downloads_it(
    browser: Any, live_server: Any, sim: Sim, member: Any, team: Any, image: Any
) -> None:
    expect = sync_api().expect
    job = _finished_job(sim, member, team, image)
    task = job.tasks.get()
    log = sim.backend.logs(str(job.pk), task.name)
    assert "epochs" in log

    base = live_server.url
    console = Console()
    page = new_page(browser, console)
    log_in(page, base, "max", then=f"/jobs/{job.pk}/")
    expect(page.locator("#job-logs")).to_contain_text("exited with code 0")
    search = page.get_by_label("Search in the log")
    search.fill("EPOCHS")  # any case
    expected = log.lower().count("epochs")
    marks = page.locator("#job-logs mark")
    expect(marks).to_have_count(expected)
    expect(page.locator("#log-search-count")).to_have_text(
        f"1 of {expected} match" + ("es" if expected > 1 else "")
    )
    expect(page.locator("#job-logs mark.current")).to_have_count(1)
    expect(marks.first).to_have_text("epochs")
    # The log text itself is unchanged by the highlighting.
    assert page.locator("#job-logs").text_content() == log
    search.fill("no such text")
    expect(page.locator("#log-search-count")).to_have_text("No match")
    expect(marks).to_have_count(0)
    search.fill("exited")
    expect(page.locator("#log-search-next")).to_be_enabled()
    shot(page, "job-log-search.png")

    # Playwright's download event did not fire for this link with Debian's headless Chromium here, so
    # the test fetches the link's target with the page's session, as the click would.
    link = page.get_by_role("link", name="Download log")
    href = link.get_attribute("href")
    assert href == f"/jobs/{job.pk}/logs.txt" and link.get_attribute("download") is not None
    answer = page.request.get(f"{base}{href}")
    assert answer.status == 200 and answer.text() == log
    assert answer.headers["content-disposition"] == f'attachment; filename="job-{job.pk}-logs.txt"'

    phone = new_page(browser, console, PHONE)
    log_in(phone, base, "max", then=f"/jobs/{job.pk}/")
    phone.wait_for_load_state("networkidle")
    phone.get_by_label("Search in the log").fill("exited")
    expect(phone.locator("#job-logs mark")).to_have_count(log.count("exited"))
    assert no_horizontal_overflow(phone)
    phone.context.close()
    assert console.errors == []

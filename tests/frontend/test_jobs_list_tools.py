"""The jobs list's tools: search by name, sortable columns, runtime and GPU-hours from the run ledger,
and bulk cancel with a confirmation, only of the jobs the user may cancel (jobs.services.job_cancel
decides; the checkboxes only hide what could not work)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import Job
from quotas.models import RunUsage
from tests.frontend import portal_browser
from tests.frontend.portal_browser import (
    Console,
    Sim,
    browser_test,
    check_phone_width,
    log_in,
    new_page,
    shot,
    sync_api,
    unlabelled_controls,
)

browser = portal_browser.browser  # the module's Chromium (a fixture)
sim = portal_browser.sim


def _finished(team: Any, user: Any, image: Any, name: str, *, milli: int, hours: float) -> Job:
    """A job that ran once for ``hours`` holding ``milli`` milli-GPU and succeeded."""
    end = timezone.now() - dt.timedelta(hours=1)
    start = end - dt.timedelta(hours=hours)
    gpus = milli // 1000
    job = Job.objects.create(
        team=team,
        user=user,
        image=image,
        name=name,
        command=["python", "x.py"],
        gpus=gpus,
        gpu_milli=0 if gpus else milli,
        status="SUCCEEDED",
        submitted_at=start,
        started_at=start,
        finished_at=end,
    )
    RunUsage.objects.create(
        team=team,
        job=job,
        started_at=start,
        ended_at=end,
        gpus=max(1, gpus),
        gpu_milli=milli,
        gpu_seconds=max(1, gpus) * hours * 3600,
        ended_as="SUCCEEDED",
    )
    return job


def shown_ids(page: Any) -> list[int]:
    """The job ids of the list's rows, top to bottom."""
    rows = page.eval_on_selector_all(
        "#jobs-table tbody tr[data-job-id]", "rs => rs.map(r => r.dataset.jobId)"
    )
    return [int(i) for i in rows]


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_runtime_and_gpu_hours_count_every_run_of_a_preempted_job(
    member: Any, outsider: Any, team: Any, image: Any
) -> None:
    job = _finished(team, member, image, "twice", milli=250, hours=2)
    first = RunUsage.objects.get(job=job)
    RunUsage.objects.create(
        team=team,
        job=job,
        started_at=first.started_at - dt.timedelta(hours=5),
        ended_at=first.started_at - dt.timedelta(hours=4),
        gpus=1,
        gpu_milli=250,
        gpu_seconds=3600,
        ended_as="PREEMPTING",
    )
    answer = _client(member).get(f"/portal/jobs/usage?ids={job.pk}").json()
    # 2 h + 1 h of runs (the 3 h wait between them is not runtime); a quarter GPU for 3 h.
    assert answer == {"jobs": {str(job.pk): {"runtime_seconds": 10800.0, "gpu_hours": 0.75}}}
    assert _client(outsider).get(f"/portal/jobs/usage?ids={job.pk}").json() == {"jobs": {}}
    for bad in ("", "1,x", ",".join(["1"] * 101), "0", "-3"):
        response = _client(member).get(f"/portal/jobs/usage?ids={bad}")
        assert response.status_code == 400, bad
        assert response.json()["extra"]["fields"]["ids"]


@pytest.mark.django_db
def test_bulk_cancel_cancels_only_what_the_user_may_and_says_why_not(
    sim: Sim, member: Any, owner: Any, viewer: Any, outsider: Any, submit_job: Any, team: Any, image: Any
) -> None:
    mine, owners = submit_job(member, name="mine"), submit_job(owner, name="owners")
    done = _finished(team, member, image, "done", milli=1000, hours=1)
    answer = _client(member).post(
        "/portal/jobs/cancel", {"ids": [mine.pk, owners.pk, done.pk, 999999]}, content_type="application/json"
    )
    assert answer.status_code == 200
    body = answer.json()
    assert body["cancelled"] == [{"id": mine.pk, "status": "STOPPED"}]
    refused = {r["id"]: r["message"] for r in body["refused"]}
    assert set(refused) == {owners.pk, done.pk, 999999}
    assert "submitter or a team owner" in refused[owners.pk]
    assert "already finished" in refused[done.pk]
    assert refused[999999] == "No job with this id."
    # Viewers cancel nothing; other teams' jobs do not exist for them.
    assert (
        _client(viewer)
        .post("/portal/jobs/cancel", {"ids": [owners.pk]}, content_type="application/json")
        .json()["cancelled"]
        == []
    )
    outside = _client(outsider).post(
        "/portal/jobs/cancel", {"ids": [owners.pk]}, content_type="application/json"
    )
    assert outside.json()["refused"] == [{"id": owners.pk, "message": "No job with this id."}]
    owners.refresh_from_db()
    assert owners.status == "QUEUED"
    for bad in ({}, {"ids": []}, {"ids": ["1"]}, {"ids": [True]}, {"ids": list(range(1, 102))}):
        response = _client(member).post("/portal/jobs/cancel", bad, content_type="application/json")
        assert response.status_code == 400, bad
    assert (
        Client().post("/portal/jobs/cancel", {"ids": [1]}, content_type="application/json").status_code == 401
    )


@pytest.mark.django_db
def test_the_jobs_api_finds_jobs_by_part_of_their_name(
    member: Any, submit_job: Any, api_client_for: Any
) -> None:
    submit_job(member, name="ResNet-50")
    submit_job(member, name="bert-large")
    answer = api_client_for(member).get("/api/v1/jobs/?name=resnet").json()
    assert [job["name"] for job in answer["results"]] == ["ResNet-50"]


@browser_test
@pytest.mark.django_db(transaction=True)
def test_a_researcher_searches_sorts_and_bulk_cancels_jobs(
    browser: Any, live_server: Any, sim: Sim, member: Any, owner: Any, team: Any, image: Any, submit_job: Any
) -> None:
    expect = sync_api().expect
    alpha = submit_job(member, name="alpha-train")
    beta = submit_job(member, name="beta-train")
    gamma = submit_job(member, name="gamma-eval")
    owners = submit_job(owner, name="owner-job")
    small = _finished(team, member, image, "done-small", milli=500, hours=2)
    big = _finished(team, member, image, "done-big", milli=2000, hours=1)

    base = live_server.url
    console = Console()
    page = new_page(browser, console)
    log_in(page, base, "max", then="/jobs/")
    page.goto(f"{base}/jobs/")
    rows = page.locator("#jobs-table tbody tr[data-job-id]")
    expect(rows).to_have_count(6)
    assert unlabelled_controls(page) == []
    row = lambda job: page.locator(f'#jobs-table tr[data-job-id="{job.pk}"]')  # noqa: E731
    ids = lambda: shown_ids(page)  # noqa: E731
    expect(row(small).locator(".runtime")).to_have_text("2 h 0 min")
    expect(row(small).locator(".gpu-hours")).to_have_text("1.00")
    expect(row(big).locator(".runtime")).to_have_text("1 h 0 min")
    expect(row(big).locator(".gpu-hours")).to_have_text("2.00")
    expect(row(alpha).locator(".runtime")).to_have_text("0 s")

    # Search by name (any case), kept in the address.
    page.get_by_label("Name").fill("TRAIN")
    expect(page).to_have_url(re.compile(r"name=TRAIN"))
    expect(rows).to_have_count(2)
    assert sorted(ids()) == sorted([alpha.pk, beta.pk])
    page.get_by_label("Name").fill("")
    expect(rows).to_have_count(6)

    # Sort: GPU-hours (largest first), then by job id both ways (the API orders those).
    page.get_by_role("button", name="GPU-hours").click()
    expect(page.locator('th[data-sort="gpu_hours"]')).to_have_attribute("aria-sort", "descending")
    assert ids()[:2] == [big.pk, small.pk]
    page.get_by_role("button", name="Job", exact=True).click()
    expect(page).to_have_url(re.compile(r"sort=id"))
    expect(page.locator('th[data-sort="id"]')).to_have_attribute("aria-sort", "ascending")
    expect(rows.first).to_have_attribute("data-job-id", str(min(ids())))
    assert ids() == sorted(ids())
    page.get_by_role("button", name="Job", exact=True).click()
    expect(rows.first).to_have_attribute("data-job-id", str(max(ids())))
    shot(page, "jobs-list-tools.png")

    # Bulk cancel: checkboxes only on this researcher's own unfinished jobs.
    pickable = sorted(int(v) for v in page.eval_on_selector_all("input.pick", "bs => bs.map(b => b.value)"))
    assert pickable == sorted([alpha.pk, beta.pk, gamma.pk])
    row(alpha).locator("input.pick").check()
    row(gamma).locator("input.pick").check()
    button = page.locator("#bulk-cancel")
    expect(button).to_have_text("Cancel selected (2)")
    button.click()
    expect(page.locator("#bulk-confirm")).to_contain_text(f"Cancel 2 jobs (#{alpha.pk}, #{gamma.pk})?")
    page.get_by_role("button", name="No, keep them").click()
    expect(page.locator("#bulk-confirm")).to_be_hidden()
    assert Job.objects.get(pk=alpha.pk).status == "QUEUED"
    button.click()
    page.get_by_role("button", name="Yes, cancel them").click()
    expect(page.locator("#bulk-note")).to_have_text("Cancelled 2 jobs.")
    expect(row(alpha).locator(".badge")).to_have_text("STOPPED")
    expect(row(gamma).locator(".badge")).to_have_text("STOPPED")
    expect(row(beta).locator(".badge")).to_have_text("QUEUED")
    statuses = dict(
        Job.objects.filter(pk__in=[alpha.pk, beta.pk, gamma.pk, owners.pk]).values_list("pk", "status")
    )
    assert statuses == {alpha.pk: "STOPPED", beta.pk: "QUEUED", gamma.pk: "STOPPED", owners.pk: "QUEUED"}
    expect(button).to_be_disabled()

    # "Select all" takes every job this user may cancel on the page, and nothing else.
    page.locator("#select-all").check()
    expect(button).to_have_text("Cancel selected (1)")
    check_phone_width(browser, console, base, "max", ["/jobs/", "/jobs/?sort=-gpu_hours"])
    assert console.errors == []

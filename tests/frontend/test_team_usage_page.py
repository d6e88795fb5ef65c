"""The team lead's Usage page (/teams/<id>/usage/): its numbers against a hand-computed usage ledger
that has a preempted job (two runs), a shared-GPU job crossing midnight, a job still running since
the month before and another team's job, then the same page in Chromium at laptop and phone width.

The ledger lies in the previous month (``?month=``), so every number is fixed whatever the time the
test runs; the running job's current run is cut at the month's end.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import Job
from quotas.models import Quota, RunUsage, UsageEntry
from quotas.selectors import month_start
from tests.frontend import portal_browser
from tests.frontend.portal_browser import (
    Console,
    browser_test,
    check_phone_width,
    log_in,
    new_page,
    shot,
    sync_api,
    unlabelled_controls,
)

browser = portal_browser.browser  # the module's Chromium (a fixture)


@dataclass
class Ledger:
    month: str
    start: dt.datetime
    last_day: dt.date
    queued: Job


def _job(team: Any, user: Any, image: Any, name: str, **fields: Any) -> Job:
    return Job.objects.create(
        team=team, user=user, image=image, name=name, command=["python", "x.py"], **fields
    )


def _run(job: Job, start: dt.datetime, hours: float, ended_as: str = "SUCCEEDED") -> None:
    end = start + dt.timedelta(hours=hours)
    gpus = max(1, job.gpus) * job.replicas
    RunUsage.objects.create(
        team=job.team,
        job=job,
        started_at=start,
        ended_at=end,
        gpus=gpus,
        gpu_milli=job.total_gpu_milli,
        gpu_seconds=gpus * hours * 3600,
        ended_as=ended_as,
    )


@pytest.fixture
def ledger(team: Any, other_team: Any, member: Any, owner: Any, outsider: Any, image: Any) -> Ledger:
    this_month = month_start(timezone.now())
    start = (this_month - dt.timedelta(days=1)).replace(day=1)
    day = lambda n, hour, minute=0: start.replace(day=n, hour=hour, minute=minute)  # noqa: E731
    done = {"status": "SUCCEEDED", "finished_at": day(5, 0)}
    # max: two whole GPUs for 3 h on the 2nd = 6.0; one GPU preempted after 1 h, then 0.5 h more on the 3rd = 1.5.
    _run(_job(team, member, image, "ddp", gpus=2, **done), day(2, 10), 3)
    preempted = _job(team, member, image, "preempted", gpus=1, preemptions=1, **done)
    _run(preempted, day(3, 9), 1, ended_as="PREEMPTING")
    _run(preempted, day(3, 11), 0.5)
    # olivia: a quarter GPU from 20:00 on the 3rd to 04:00 on the 4th = 1.0 + 1.0.
    _run(_job(team, owner, image, "shared", gpu_milli=250, **done), day(3, 20), 8)
    # olivia: half a GPU running since 22:00 on the month's last day = 1.0 in that month.
    running = _job(
        team,
        owner,
        image,
        "still-running",
        gpu_milli=500,
        status="RUNNING",
        started_at=this_month - dt.timedelta(hours=2),
        run_started_at=this_month - dt.timedelta(hours=2),
    )
    UsageEntry.objects.create(
        team=team, user=owner, job=running, gpu_milli=500, reserved_at=running.started_at
    )
    # Another team's 8 GPUs for 10 h: never on this team's page.
    _run(_job(other_team, outsider, image, "speech", gpus=8, **done), day(2, 0), 10)
    queued = _job(
        team,
        member,
        image,
        "waits",
        gpus=4,
        status="QUEUED",
        submitted_at=timezone.now(),
        pending_reason="waiting for quota: team vision uses 8 of 8 GPUs",
    )
    Quota.objects.filter(team=team).update(guaranteed_gpu_milli=2000, used_gpu_milli=500)
    last_day = (this_month - dt.timedelta(days=1)).date()
    return Ledger(month=f"{start:%Y-%m}", start=start, last_day=last_day, queued=queued)


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_usage_page_counts_each_users_gpu_hours_as_the_hand_computed_ledger(
    ledger: Ledger, team: Any, member: Any
) -> None:
    response = _client(member).get(f"/teams/{team.pk}/usage/?month={ledger.month}")
    assert response.status_code == 200
    page = response.context["page"]
    assert page.by_user == [("max", 7.5), ("olivia", 3.0)]
    assert page.month_hours == 10.5
    days = dict(page.by_day)
    assert len(days) == ledger.last_day.day  # every day of the month, zeros included
    second, third, fourth = (ledger.start.replace(day=n).date() for n in (2, 3, 4))
    assert (days[second], days[third], days[fourth], days[ledger.last_day]) == (6.0, 2.5, 1.0, 1.0)
    assert sum(days.values()) == pytest.approx(10.5)
    assert sum(h for d, h in days.items() if d not in (second, third, fourth, ledger.last_day)) == 0
    # GPUs in use against the quota, and the waiting job with its reason.
    assert (page.quota.used_gpu_milli, page.quota.guaranteed_gpu_milli, page.quota.max_gpu_milli) == (
        500,
        2000,
        8000,
    )
    assert [(w.job.pk, w.position) for w in page.waiting] == [(ledger.queued.pk, 1)]
    html = response.content.decode()
    assert 'data-user="max" data-hours="7.5"' in html and 'data-user="olivia" data-hours="3.0"' in html
    assert "waiting for quota: team vision uses 8 of 8 GPUs" in html
    # The page's CSV link is the usage API's report of the same numbers.
    csv_url = html.split('id="usage-csv" href="')[1].split('"')[0].replace("&amp;", "&")
    lines = _client(member).get(csv_url).content.decode().splitlines()
    assert lines == [
        "user,month,gpu_hours",
        f"max,{ledger.month},7.500000",
        f"olivia,{ledger.month},3.000000",
    ]


@pytest.mark.django_db
def test_this_months_page_counts_the_running_job_until_now(ledger: Ledger, team: Any, owner: Any) -> None:
    before = timezone.now()
    page = _client(owner).get(f"/teams/{team.pk}/usage/").context["page"]
    after = timezone.now()
    since_month = lambda t: (t - month_start(t)).total_seconds() / 3600  # noqa: E731
    (name, hours), *rest = page.by_user
    assert name == "olivia" and rest == []
    assert 0.5 * since_month(before) - 1e-6 <= hours <= 0.5 * since_month(after) + 1e-6
    assert page.month_hours == hours
    assert len(page.last_days) == 7 and page.last_days[-1].day == after.date()


@pytest.mark.django_db
def test_the_usage_page_is_a_404_outside_the_team_and_a_400_for_a_bad_month(
    ledger: Ledger, team: Any, outsider: Any, viewer: Any
) -> None:
    assert _client(outsider).get(f"/teams/{team.pk}/usage/").status_code == 404
    assert _client(viewer).get(f"/teams/{team.pk}/usage/").status_code == 200
    for month in ("2026-13", "nov", "2026-11-01", "9999-01"):
        response = _client(viewer).get(f"/teams/{team.pk}/usage/?month={month}")
        assert response.status_code == 400, month
        assert b'id="usage-error"' in response.content
    assert Client().get(f"/teams/{team.pk}/usage/").status_code == 302
    assert _client(viewer).get("/usage/")["Location"] == f"/teams/{team.pk}/usage/"


@pytest.mark.django_db
def test_a_quota_admin_reads_every_teams_usage_page(ledger: Ledger, team: Any, quota_admin: Any) -> None:
    page = _client(quota_admin).get(f"/teams/{team.pk}/usage/?month={ledger.month}").context["page"]
    assert page.by_user == [("max", 7.5), ("olivia", 3.0)]
    first = _client(quota_admin).get("/usage/")["Location"]
    assert first.startswith("/teams/") and first.endswith("/usage/")


@browser_test
@pytest.mark.django_db(transaction=True)
def test_a_team_lead_reads_the_usage_page_with_its_charts_in_a_browser(
    browser: Any, live_server: Any, ledger: Ledger, team: Any, owner: Any
) -> None:
    from observability.models import ClusterSample

    expect = sync_api().expect
    # Two sampled hours of cluster history: the team held 1.5 GPUs, then 0.5.
    hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    for ago, held in ((3, 1500), (2, 500)):
        ClusterSample.objects.create(
            at=hour - dt.timedelta(hours=ago),
            resolution_s=600,
            covered_s=600.0,
            capacity_milli=40000.0,
            allocated_milli=held + 2000.0,
            fragmentation=0.1,
            running=2.0,
            waiting=1.0,
            by_team={
                "vision": {"allocated_milli": held, "running": 1, "waiting": 1},
                "speech": {"allocated_milli": 2000, "running": 1, "waiting": 0},
            },
        )
    base = live_server.url
    console = Console()
    page = new_page(browser, console)
    log_in(page, base, "olivia", then="/jobs/")
    page.get_by_role("link", name="Usage").click()
    page.wait_for_url(f"{base}/teams/{team.pk}/usage/")
    page.get_by_label("Month", exact=True).fill(ledger.month)
    page.get_by_role("button", name="Show").click()
    page.wait_for_url(f"{base}/teams/{team.pk}/usage/?month={ledger.month}")
    rows = page.eval_on_selector_all(
        "#user-hours-table tbody tr", "rs => rs.map(r => [r.dataset.user, Number(r.dataset.hours)])"
    )
    assert rows == [["max", 7.5], ["olivia", 3.0]]
    assert unlabelled_controls(page) == []
    expect(page.locator("#user-hours-total")).to_have_text("10.500")
    expect(page.locator("#stat-in-use")).to_have_text("0.5")
    expect(page.locator("#stat-guarantee")).to_have_text("2")
    expect(page.locator("#stat-maximum")).to_have_text("8")
    expect(page.locator(f'#waiting-table tr[data-job-id="{ledger.queued.pk}"]')).to_contain_text(
        "waiting for quota"
    )
    # Both charts are drawn (uPlot paints a canvas), one bar per user.
    expect(page.locator("#user-chart canvas")).to_have_count(1)
    expect(page.locator("#day-chart canvas")).to_have_count(1)
    expect(page.locator("#user-chart .u-legend")).to_contain_text("GPU-hours")
    # The last 7 days from the cluster history: this team's series only.
    expect(page.locator("#week-note")).to_contain_text("Peak: 1.5 GPUs held")
    expect(page.locator("#week-chart canvas")).to_have_count(1)
    shot(page, "team-usage.png")
    check_phone_width(browser, console, base, "olivia", [f"/teams/{team.pk}/usage/?month={ledger.month}"])
    assert console.errors == []

"""GPU-hour reports (observability.usage) against a ledger computed by hand.

The jobs go through the real state machine (``jobs.services.job_transition``) at chosen times, so the
run ledger is what the platform writes: a job preempted once and run again, a job requeued after a
platform failure and run again (a retry), a shared-GPU job crossing a month boundary, a job of another
team, and a job still running. Expected GPU-hours (share x hours of each run):

====================  ======  ==================================================  ========
job                   share   runs                                                GPU-h
====================  ======  ==================================================  ========
preempted (ada)       2 GPU   Nov 10 08:00-10:00, 12:00-13:30                      7.0
shared (ada)          0.25    Nov 30 20:00 - Dec 1 04:00 (4 h in each month)        1.0 + 1.0
retried (bob, tf)     1 GPU   Nov 5 00:00-01:00, 03:00-05:00                       3.0
other team (oscar)    2x2 GPU Nov 20 00:00-00:30                                   2.0
running (ada)         1 GPU   Dec 1 10:00 - now (Dec 1 12:00)                      2.0
====================  ======  ==================================================  ========
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any

import pytest
import time_machine

from accounts.models import Membership, Role
from images.models import JobImage
from jobs.models import Job
from jobs.services import job_transition
from jobs.states import JobStatus
from observability.usage import daily_usage, usage_report
from tests.jobs.runtime_fixtures import clock, image, make_member, make_team, sim, submit, team  # noqa: F401

S = JobStatus
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def at(month: int, day: int, hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, month, day, hour, minute, tzinfo=dt.UTC)


def story(job: Job, *steps: tuple[dt.datetime, JobStatus]) -> None:
    """Walk ``job`` through ``steps`` (time, status) with the platform's own transition service."""
    for when, status in steps:
        with time_machine.travel(when, tick=False):
            assert job_transition(job=job, to=status, actor="scheduler", failure_category="")


def start(when: dt.datetime) -> list[tuple[dt.datetime, JobStatus]]:
    return [(when, S.ADMITTED), (when, S.STARTING), (when, S.RUNNING)]


def again(when: dt.datetime) -> list[tuple[dt.datetime, JobStatus]]:
    return [(when, S.QUEUED), *start(when)]


@pytest.fixture
def ledger(sim, team, image) -> dict[str, Any]:  # noqa: F811
    ada = make_member("ada", team)
    bob = make_member("bob", team)
    speech = make_team("speech")
    oscar = make_member("oscar", speech)
    Membership.objects.filter(user=oscar).update(role=Role.OWNER)
    tf = JobImage.objects.create(name="tensorflow", tag="2.15", framework="tensorflow")

    with time_machine.travel(at(11, 1, 0), tick=False):
        preempted = submit(ada, image, gpus=2)
        shared = submit(ada, image, gpu_milli=250)
        retried = submit(bob, tf, gpus=1)
        other = submit(oscar, image, team=speech, gpus=2, replicas=2)
        running = submit(ada, image, gpus=1)
    story(
        preempted,
        *start(at(11, 10, 8)),
        (at(11, 10, 10), S.PREEMPTING),
        (at(11, 10, 10), S.REQUEUED),
        *again(at(11, 10, 12)),
        (at(11, 10, 13, 30), S.SUCCEEDED),
    )
    story(shared, *start(at(11, 30, 20)), (at(12, 1, 4), S.SUCCEEDED))
    story(
        retried,
        *start(at(11, 5, 0)),
        (at(11, 5, 1), S.REQUEUED),
        *again(at(11, 5, 3)),
        (at(11, 5, 5), S.SUCCEEDED),
    )
    story(other, *start(at(11, 20, 0)), (at(11, 20, 0, 30), S.SUCCEEDED))
    story(running, *start(at(12, 1, 10)))
    return {"ada": ada, "bob": bob, "oscar": oscar}


def test_the_november_report_by_team_and_user_matches_the_hand_computed_ledger(ledger) -> None:
    rows = usage_report(group_by=["team", "user"], month="2026-11", now=NOW)
    assert rows == [
        {"team": "speech", "user": "oscar", "month": "2026-11", "gpu_hours": 2.0},
        {"team": "vision", "user": "ada", "month": "2026-11", "gpu_hours": 8.0},
        {"team": "vision", "user": "bob", "month": "2026-11", "gpu_hours": 3.0},
    ]


def test_preempted_and_retried_jobs_count_each_run_once_and_no_queue_time(ledger) -> None:
    rows = usage_report(group_by=["user", "image"], month="2026-11", team="vision", now=NOW)
    by_key = {(r["user"], r["image"]): r["gpu_hours"] for r in rows}
    # ada: 2 GPUs x (2 h + 1.5 h) + 0.25 x 4 h; bob: 1 GPU x (1 h + 2 h).
    assert by_key == {("ada", "pytorch:2.4"): 8.0, ("bob", "tensorflow:2.15"): 3.0}


def test_a_shared_gpu_job_counts_its_share_in_each_month_it_ran(ledger) -> None:
    rows = usage_report(group_by=["team", "month"], team="vision", now=NOW)
    # December: the shared job's last 4 h (1.0) and the running job's 2 h so far (2.0).
    assert rows == [
        {"team": "vision", "month": "2026-11", "gpu_hours": 11.0},
        {"team": "vision", "month": "2026-12", "gpu_hours": 3.0},
    ]


def test_reports_by_image_cover_every_team_unless_scoped(ledger) -> None:
    everyone = usage_report(group_by=["image"], month="2026-11", now=NOW)
    assert everyone == [
        {"image": "pytorch:2.4", "month": "2026-11", "gpu_hours": 10.0},
        {"image": "tensorflow:2.15", "month": "2026-11", "gpu_hours": 3.0},
    ]
    assert usage_report(group_by=["team"], month="2026-11", teams=["speech"], now=NOW) == [
        {"team": "speech", "month": "2026-11", "gpu_hours": 2.0}
    ]
    assert usage_report(group_by=["team"], month="2026-11", team="vision", teams=["speech"], now=NOW) == []


def test_daily_usage_spreads_runs_over_their_days_and_adds_up_to_the_month(ledger) -> None:
    days = daily_usage("vision", "2026-11", now=NOW)
    assert len(days) == 30 and days[0]["day"] == "2026-11-01" and days[-1]["day"] == "2026-11-30"
    nonzero = {d["day"]: d["gpu_hours"] for d in days if d["gpu_hours"]}
    assert nonzero == {"2026-11-05": 3.0, "2026-11-10": 7.0, "2026-11-30": 1.0}
    assert sum(d["gpu_hours"] for d in days) == pytest.approx(11.0)
    december = daily_usage("vision", "2026-12", now=NOW)
    assert december == [{"day": "2026-12-01", "gpu_hours": 3.0}]  # the current month stops at today


def test_bad_months_and_group_keys_are_refused_with_a_message() -> None:
    with pytest.raises(ValueError, match="YYYY-MM"):
        usage_report(group_by=["team"], month="2026-13")
    with pytest.raises(ValueError, match="unknown: 'node'"):
        usage_report(group_by=["team", "node"])


def test_the_usage_api_answers_the_report_as_json_and_csv(ledger, api_client_for) -> None:
    client = api_client_for(ledger["ada"])
    with time_machine.travel(NOW, tick=False):
        response = client.get("/api/v1/usage/", {"group_by": "team,user", "month": "2026-11"})
        assert response.status_code == 200
        assert response.json()["results"] == [
            {"team": "vision", "user": "ada", "month": "2026-11", "gpu_hours": 8.0},
            {"team": "vision", "user": "bob", "month": "2026-11", "gpu_hours": 3.0},
        ]
        exported = client.get(
            "/api/v1/usage/", {"group_by": "team,user", "month": "2026-11", "format": "csv"}
        )
    assert exported.status_code == 200 and exported["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert [r["user"] for r in rows] == ["ada", "bob"]
    assert sum(float(r["gpu_hours"]) for r in rows) == pytest.approx(11.0)
    assert list(rows[0]) == ["team", "user", "month", "gpu_hours"]


def test_the_usage_api_refuses_bad_input_with_field_messages_and_hides_other_teams(
    ledger, api_client_for
) -> None:
    client = api_client_for(ledger["ada"])
    bad = client.get("/api/v1/usage/", {"group_by": "node", "month": "11/2026", "format": "csv"})
    assert bad.status_code == 400 and bad["Content-Type"].startswith("application/json")
    assert set(bad.json()["extra"]["fields"]) == {"group_by", "month"}
    for empty in ("group_by", "month"):
        assert client.get("/api/v1/usage/", {empty: ""}).status_code == 400, empty
    assert client.get("/api/v1/usage/", {"month": "2026-11\n"}).status_code == 400
    assert client.get("/api/v1/usage/", {"group_by": "team,"}).status_code == 400
    assert client.get("/api/v1/usage/", {"team": ""}).status_code == 404
    assert client.get("/api/v1/usage/", {"team": "speech"}).status_code == 404
    assert client.get("/api/v1/usage/", {"team": "nonexistent"}).status_code == 404
    assert api_client_for(None).get("/api/v1/usage/").status_code == 401


def test_the_admin_action_exports_every_teams_month_as_csv(ledger, client) -> None:
    from django.contrib.auth import get_user_model

    from quotas.models import RunUsage

    admin_user = get_user_model().objects.create_superuser("root-admin", "a@example.org", "pw-12345678")
    client.force_login(admin_user)
    url = "/admin/observability/usagerun/"
    picked = [RunUsage.objects.filter(team__slug="vision").first().pk]
    asked = client.post(url, {"action": "export_month_csv", "_selected_action": picked})
    assert asked.status_code == 200 and b'name="month"' in asked.content
    refused = client.post(
        url, {"action": "export_month_csv", "_selected_action": picked, "apply": "1", "month": "nov"}
    )
    assert refused.status_code == 200 and b"YYYY-MM" in refused.content
    exported = client.post(
        url, {"action": "export_month_csv", "_selected_action": picked, "apply": "1", "month": "2026-11"}
    )
    assert exported.status_code == 200 and exported["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    # Every team, not only the selected run's: 8 + 3 (vision) + 2 (speech).
    assert {(r["team"], r["user"], r["image"]): float(r["gpu_hours"]) for r in rows} == {
        ("speech", "oscar", "pytorch:2.4"): 2.0,
        ("vision", "ada", "pytorch:2.4"): 8.0,
        ("vision", "bob", "tensorflow:2.15"): 3.0,
    }
    assert client.get(url).status_code == 200

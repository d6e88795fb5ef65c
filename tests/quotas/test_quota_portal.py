"""Quota state where people look: the dashboard warns past 80 % of the budget, the team page shows
borrowing and fair share, and a job's detail (API and portal data) says when it runs on borrowed GPUs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.services import job_transition
from jobs.states import JobStatus
from quotas.models import Quota

pytestmark = pytest.mark.django_db


def _admit(job: Job) -> Job:
    job_transition(job=job, to=JobStatus.ADMITTED, actor="scheduler")
    return job


def test_the_dashboard_warns_a_team_past_80_percent_of_its_budget(client, submit_job, member, team) -> None:
    Quota.objects.filter(team=team).update(gpu_hours_per_month=10.0)
    job = _admit(submit_job(member, gpu_milli=None, gpus=1))
    client.force_login(member)
    assert "budget-warning-vision" not in client.get("/").content.decode()

    Job.objects.filter(pk=job.pk).update(started_at=timezone.now() - timedelta(hours=9))

    page = client.get("/").content.decode()
    assert 'id="budget-warning-vision"' in page
    assert "Team Vision has used" in page and "of its 10 GPU-hour budget this month" in page


def test_the_team_page_shows_borrowing_and_fair_share(client, submit_job, member, team) -> None:
    Quota.objects.filter(team=team).update(guaranteed_gpu_milli=1000)
    _admit(submit_job(member, gpu_milli=None, gpus=3))
    client.force_login(member)

    page = client.get(f"/teams/{team.pk}/").content.decode()

    assert "Borrowed now: 2 GPUs beyond the guarantee; fair-share factor 1.000" in page


def test_a_job_on_borrowed_gpus_says_so_in_its_detail(submit_job, member, team, api_client_for) -> None:
    Quota.objects.filter(team=team).update(guaranteed_gpu_milli=1000)
    own = _admit(submit_job(member, gpu_milli=None, gpus=1))
    extra = _admit(submit_job(member, gpu_milli=None, gpus=2, priority=100))
    client = api_client_for(member)

    assert client.get(f"/api/v1/jobs/{own.pk}/").json()["borrowed_gpu_milli"] == 0
    detail = client.get(f"/api/v1/jobs/{extra.pk}/").json()
    assert (detail["borrowed_gpu_milli"], detail["priority_class"]) == (2000, "high")


def test_a_priority_class_may_be_named_at_submit(member, team, image, api_client_for) -> None:
    client = api_client_for(member)
    body = {"team": team.pk, "image": image.pk, "command": ["python", "train.py"], "gpu_milli": 250}

    high = client.post("/api/v1/jobs/", {**body, "priority": "high"}, format="json")
    unknown = client.post("/api/v1/jobs/", {**body, "priority": "asap"}, format="json")
    urgent = client.post("/api/v1/jobs/", {**body, "priority": "urgent"}, format="json")

    assert high.status_code == 201 and high.json()["priority"] == 100
    assert unknown.status_code == 400 and "priority" in unknown.json()["extra"]["fields"]
    assert urgent.status_code == 400 and "urgent" in str(urgent.json()["extra"]["fields"]["priority"])

"""Team queues on the platform: the real cycle, sync, bind, simulated backend and database.

A team over its free quota gets 201 and a QUEUED job that says why; a request no node could hold
gets 400 and changes nothing; a borrower runs on idle GPUs, marked as borrowed, and is reclaimed
when the lender submits; a grant lets a job waiting for the budget run."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache

from accounts.services import token_create
from jobs import scheduling
from jobs.binding import job_bind
from jobs.models import Job, JobEvent
from jobs.states import JobStatus
from jobs.sync import sync_status
from quotas.models import Quota, UsageEntry
from quotas.services import budget_grant
from scheduler.backends.simulated import SimulatedBackend
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    make_member,
    make_team,
    sim,
    submit,
)

pytestmark = pytest.mark.django_db


def cycle(sim: SimulatedBackend) -> scheduling.CycleResult:
    cache.delete(scheduling.round_key())
    result = scheduling.run_scheduling_cycle(backend=sim)
    assert result is not None
    return result


def start(job: Job, sim: SimulatedBackend, clock: Any) -> None:
    assert job_bind(job_id=job.pk, backend=sim) == "bound"
    clock.advance(15)
    sync_status(backend=sim)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING.value


def teams(**limits: dict[str, int]) -> dict[str, Any]:
    out = {}
    for slug, values in limits.items():
        team = make_team(slug)
        Quota.objects.filter(team=team).update(**values)
        out[slug] = (team, make_member(f"{slug}-user", team))
    return out


def test_a_borrower_runs_on_idle_gpus_and_is_reclaimed_when_the_lender_submits(sim, clock, image) -> None:
    # The small cluster has 2 GPUs: one guaranteed to each team.
    t = teams(
        lender={"guaranteed_gpu_milli": 1000, "max_gpu_milli": 2000},
        borrower={"guaranteed_gpu_milli": 1000, "max_gpu_milli": 2000},
    )
    lender, lender_user = t["lender"]
    borrower, borrower_user = t["borrower"]
    own = submit(borrower_user, image, team=borrower, gpus=1, sim_duration_seconds=100_000)
    extra = submit(borrower_user, image, team=borrower, gpus=1, sim_duration_seconds=100_000)

    assert sorted(cycle(sim).admitted) == [own.pk, extra.pk]
    for job in (own, extra):
        start(job, sim, clock)
    # The job admitted second went beyond the guarantee: it is the borrowed one.
    borrowed = UsageEntry.objects.filter(job__in=[own, extra], borrowed_gpu_milli__gt=0)
    assert [e.borrowed_gpu_milli for e in borrowed] == [1000]
    if borrowed.get().job_id == own.pk:
        own, extra = extra, own
    admitted = JobEvent.objects.get(job=extra, to_status=JobStatus.ADMITTED.value)
    assert "on borrowed GPUs: 1 beyond team Borrower's guarantee" in admitted.reason
    assert UsageEntry.objects.get(job=own, released_at__isnull=True).borrowed_gpu_milli == 0

    clock.advance(60)
    returning = submit(lender_user, image, team=lender, gpus=1, sim_duration_seconds=100)
    result = cycle(sim)

    assert result.evicted == [extra.pk]
    extra.refresh_from_db()
    assert extra.status == JobStatus.PREEMPTING.value and extra.preemption_rule == "reclaim"
    event = JobEvent.objects.get(job=extra, to_status=JobStatus.PREEMPTING.value)
    assert "reclaimed by team Lender (under its guarantee)" in event.reason
    returning.refresh_from_db()
    assert f"waiting for preempted job {extra.pk} to stop" in returning.pending_reason

    clock.advance(120)  # the grace period passes; the victim's tasks stop
    sync_status(backend=sim)
    extra.refresh_from_db()
    assert extra.status == JobStatus.QUEUED.value
    assert Quota.objects.get(team=borrower).used_gpu_milli == 1000  # released on preemption

    assert cycle(sim).admitted == [returning.pk]
    assert Quota.objects.get(team=lender).used_gpu_milli == 1000
    own.refresh_from_db()
    assert own.status == JobStatus.RUNNING.value  # within its team's guarantee: never reclaimed


def test_over_the_free_quota_the_api_answers_201_and_the_job_says_why(sim, clock, image) -> None:
    from rest_framework.test import APIClient

    t = teams(vision={"guaranteed_gpu_milli": 1000, "max_gpu_milli": 1000})
    team, user = t["vision"]
    first = submit(user, image, team=team, gpus=1, sim_duration_seconds=100_000)
    cycle(sim)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user)[1]}")
    body = {"team": team.pk, "image": image.pk, "command": ["python", "train.py"], "gpus": 1}

    response = client.post("/api/v1/jobs/", body, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["status"] == "QUEUED"
    cycle(sim)
    waiting = Job.objects.get(pk=response.json()["id"])
    assert waiting.status == JobStatus.QUEUED.value
    assert "waiting for quota: team Vision uses 1 of 1 GPUs" in waiting.pending_reason
    assert client.get(f"/api/v1/jobs/{waiting.pk}/").json()["pending_reason"] == waiting.pending_reason
    Job.objects.filter(pk=first.pk).update()  # the first still holds the quota
    assert Quota.objects.get(team=team).used_gpu_milli == 1000


def test_a_request_for_more_gpus_per_task_than_any_node_has_gets_400_and_changes_nothing(
    sim, clock, image, settings
) -> None:
    from rest_framework.test import APIClient

    settings.CLUSTER_BACKEND = "simulated"
    settings.SIM_CLUSTER = "small"
    team, user = teams(vision={"max_gpu_milli": 8000})["vision"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user)[1]}")
    body = {"team": team.pk, "image": image.pk, "command": ["python", "train.py"], "gpus": 3}
    before = Quota.objects.filter(team=team).values().get()

    response = client.post("/api/v1/jobs/", body, format="json")

    assert response.status_code == 400
    assert "No node has 3 GPUs for one task" in str(response.json())
    assert Job.objects.count() == 0
    assert Quota.objects.filter(team=team).values().get() == before


def test_a_job_waiting_for_the_budget_runs_after_a_grant(sim, clock, image, quota_admin) -> None:
    team, user = teams(vision={"gpu_hours_per_month": 0.0})["vision"]
    job = submit(user, image, team=team, gpus=1, sim_duration_seconds=100)

    cycle(sim)
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED.value
    assert "budget of 0 GPU-h used" in job.pending_reason

    budget_grant(team=team, gpu_hours=10.0, actor=quota_admin, reason="deadline")

    assert cycle(sim).admitted == [job.pk]


def test_a_waiting_job_gets_an_eta_and_its_confidence_in_the_api(sim, clock, image, api_client_for) -> None:
    team, user = teams(vision={"max_gpu_milli": 8000})["vision"]
    first = submit(user, image, team=team, gpus=2, max_runtime_seconds=600, sim_duration_seconds=100_000)
    cycle(sim)
    start(first, sim, clock)
    waiting = submit(user, image, team=team, gpus=2, max_runtime_seconds=100)

    cycle(sim)

    body = api_client_for(user).get(f"/api/v1/jobs/{waiting.pk}/").json()
    assert body["status"] == "QUEUED"
    assert body["eta"] is not None and body["eta_confidence"] == "high"  # the running job's limit is known
    assert api_client_for(user).get(f"/api/v1/jobs/{first.pk}/").json()["eta"] is None  # not waiting

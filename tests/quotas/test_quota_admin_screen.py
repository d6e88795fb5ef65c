"""The admin screen of a team's quota shows what the cohort does with it (borrowed now, decayed usage,
fair-share factor, budget used, waiting jobs and why), and its changes go through services with an
audit event: limits, who may submit urgent jobs, budget grants."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from jobs.models import Job
from jobs.services import job_transition
from jobs.states import JobStatus
from quotas.models import BudgetGrant, Quota, QuotaEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", password="root-password-1"))
    return client


def test_the_team_screen_shows_borrowing_fair_share_budget_and_waiting_reasons(
    admin_client, submit_job, member, team
) -> None:
    Quota.objects.filter(team=team).update(guaranteed_gpu_milli=1000, gpu_hours_per_month=10)
    running = submit_job(member, gpu_milli=None, gpus=2)
    job_transition(job=running, to=JobStatus.ADMITTED, actor="scheduler")
    waiting = submit_job(member, gpu_milli=None, gpus=1)
    Job.objects.filter(pk=waiting.pk).update(pending_reason="waiting for quota: team Vision uses 8 of 8 GPUs")
    quota = Quota.objects.get(team=team)

    page = admin_client.get(f"/admin/quotas/quota/{quota.pk}/change/").content.decode()

    for words in (
        "Borrowed now (GPUs)",
        "Fair-share factor",
        "Decayed usage (GPU-h)",
        "0.0 of 10 GPU-h (0%)",
        f"job {waiting.pk} ({waiting.name}): waiting for quota: team Vision uses 8 of 8 GPUs",
    ):
        assert words in page, words
    listing = admin_client.get("/admin/quotas/quota/").content.decode()
    assert "Borrowed now" in listing and "Waiting jobs" in listing


def test_urgent_users_are_set_through_the_service_with_an_event(admin_client, team, member) -> None:
    quota = Quota.objects.get(team=team)
    form = {
        "guaranteed_gpus": "0",
        "max_gpus": "8",
        "max_concurrent_jobs": "20",
        "gpu_hours_per_month": "1000",
        "per_user_gpus": "8",
        "lending_limit_gpus": "",
        "urgent_users": [str(member.pk)],
    }

    response = admin_client.post(f"/admin/quotas/quota/{quota.pk}/change/", form)

    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(quota.urgent_users.all()) == [member]
    messages = list(QuotaEvent.objects.filter(team=team).values_list("message", flat=True))
    assert any(f"urgent users set by root: {member.username}" in m for m in messages)


def test_an_admin_grants_hours_and_the_grant_is_audited(admin_client, team) -> None:
    response = admin_client.post(
        "/admin/quotas/budgetgrant/add/",
        {"team": team.pk, "month": "2026-12", "gpu_hours": "25", "reason": "paper deadline"},
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    grant = BudgetGrant.objects.get()
    assert (grant.gpu_hours, grant.granted_by.username, grant.reason) == (25.0, "root", "paper deadline")
    event = QuotaEvent.objects.get(kind="budget_grant")
    assert event.message == "25 extra GPU-h for 2026-12 granted by root: paper deadline"
    assert admin_client.get(f"/admin/quotas/budgetgrant/{grant.pk}/delete/").status_code == 403

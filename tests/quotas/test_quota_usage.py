"""Quota usage vs limits: what GET /api/v1/quotas/ reports, GPU-hours counted from when jobs ran, and
limits changed only through quota_set (API and Django admin alike)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.utils import timezone

from jobs.models import Job
from jobs.services import job_transition
from jobs.states import JobStatus
from quotas.models import Quota, QuotaEvent, RunUsage, UsageEntry
from quotas.selectors import attained_gpu_seconds, gpu_hours_this_month, quota_usage
from quotas.services import QuotaDenied, budget_grant, quota_set

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 15, 12, 0, tzinfo=UTC)


def _admit(job: Job) -> Job:
    job_transition(job=job, to=JobStatus.ADMITTED, actor="scheduler")
    return job


def _run(job: Job, *, started: datetime, finished: datetime | None = None) -> None:
    _admit(job)
    Job.objects.filter(pk=job.pk).update(started_at=started)
    UsageEntry.objects.filter(job=job).update(reserved_at=started - timedelta(minutes=5))
    if finished is not None:
        UsageEntry.objects.filter(job=job).update(
            released_at=finished,
            gpu_hours=job.total_gpu_milli / 1000 * (finished - started).total_seconds() / 3600,
        )


def test_usage_reports_limits_and_what_is_held(submit_job, member, owner, team, api_client_for) -> None:
    _admit(submit_job(member, gpu_milli=None, gpus=2))
    _admit(submit_job(owner, gpu_milli=500))
    submit_job(owner, gpu_milli=500)  # queued: holds nothing yet

    body = api_client_for(member).get("/api/v1/quotas/").json()

    assert len(body) == 1
    usage = body[0]
    assert usage["team_slug"] == "vision"
    assert (usage["max_gpu_milli"], usage["used_gpu_milli"], usage["free_gpu_milli"]) == (8000, 2500, 5500)
    assert (usage["used_jobs"], usage["caller_gpu_milli"]) == (2, 2000)


def test_gpu_hours_count_only_running_time_within_this_month(submit_job, member, team) -> None:
    running = submit_job(member, gpu_milli=None, gpus=2)
    _run(running, started=NOW - timedelta(hours=3))  # 2 GPUs x 3 h = 6
    finished = submit_job(member, gpu_milli=500)
    _run(finished, started=NOW - timedelta(hours=10), finished=NOW - timedelta(hours=6))  # 0.5 x 4 = 2
    straddling = submit_job(member, gpu_milli=None, gpus=1)
    month = datetime(2026, 11, 1, tzinfo=UTC)
    _run(straddling, started=month - timedelta(hours=4), finished=month + timedelta(hours=4))  # half of 8 = 4
    submit_job(member, gpu_milli=None, gpus=4)  # still queued: no GPU time

    assert gpu_hours_this_month(team=team, now=NOW) == pytest.approx(6 + 2 + 4)


def test_a_finished_job_records_gpu_hours_of_the_time_it_ran(submit_job, member, team) -> None:
    job = submit_job(member, gpu_milli=None, gpus=2)
    for status in (JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING):
        job_transition(job=job, to=status, actor="t")
    Job.objects.filter(pk=job.pk).update(run_started_at=job.run_started_at - timedelta(hours=1))

    job_transition(job=job, to=JobStatus.SUCCEEDED, actor="t")

    assert UsageEntry.objects.get(job=job).gpu_hours == pytest.approx(2.0, rel=1e-3)
    (run,) = RunUsage.objects.filter(job=job)
    assert (run.gpus, run.gpu_milli, run.ended_as) == (2, 2000, "SUCCEEDED")
    job.refresh_from_db()
    assert job.attained_gpu_seconds == pytest.approx(2 * 3600, rel=1e-3) == run.gpu_seconds


def test_gpu_hours_and_attained_service_add_up_over_runs_but_not_the_wait_between(
    submit_job, member, team
) -> None:
    job = submit_job(member, gpu_milli=None, gpus=1)

    def run_for(hours: float, end: JobStatus) -> None:
        for status in (JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING):
            job_transition(job=job, to=status, actor="t")
        Job.objects.filter(pk=job.pk).update(run_started_at=job.run_started_at - timedelta(hours=hours))
        job_transition(job=job, to=end, actor="t")

    run_for(1.0, JobStatus.PREEMPTING)  # still holds GPUs during its grace
    job_transition(job=job, to=JobStatus.REQUEUED, actor="t")
    job_transition(job=job, to=JobStatus.QUEUED, actor="t")
    Job.objects.filter(pk=job.pk).update(started_at=job.started_at - timedelta(hours=24))  # long wait
    run_for(2.0, JobStatus.SUCCEEDED)

    job.refresh_from_db()
    assert attained_gpu_seconds(job_ids=[job.pk]) == {job.pk: pytest.approx(3 * 3600, rel=1e-3)}
    assert job.attained_gpu_seconds == pytest.approx(3 * 3600, rel=1e-3)
    # One ledger entry per admission, each with the hours of its own run.
    hours = list(UsageEntry.objects.filter(job=job).order_by("id").values_list("gpu_hours", flat=True))
    assert hours == [pytest.approx(1.0, rel=1e-3), pytest.approx(2.0, rel=1e-3)]
    assert list(RunUsage.objects.filter(job=job).order_by("id").values_list("ended_as", flat=True)) == [
        "REQUEUED",
        "SUCCEEDED",
    ]


def test_a_shared_gpu_counts_as_one_gpu_of_attained_service_but_its_share_of_gpu_hours(
    submit_job, member, team
) -> None:
    job = submit_job(member, gpu_milli=250, replicas=2)
    for status in (JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING):
        job_transition(job=job, to=status, actor="t")
    Job.objects.filter(pk=job.pk).update(run_started_at=job.run_started_at - timedelta(hours=2))

    job_transition(job=job, to=JobStatus.FAILED, actor="t")

    job.refresh_from_db()
    assert job.attained_gpu_seconds == pytest.approx(2 * 2 * 3600, rel=1e-3)  # 2 replicas x 2 h
    assert UsageEntry.objects.get(job=job).gpu_hours == pytest.approx(0.5 * 2, rel=1e-3)


def test_a_spent_monthly_budget_makes_gpu_jobs_wait_and_a_grant_releases_them(
    submit_job, member, team, quota_admin
) -> None:
    old = _admit(submit_job(member, gpu_milli=None, gpus=1))
    Job.objects.filter(pk=old.pk).update(started_at=old.submitted_at - timedelta(hours=2))
    Quota.objects.filter(team=team).update(gpu_hours_per_month=1.0)

    waiting = submit_job(member)  # accepted: a spent budget is not a reason to refuse
    assert waiting.status == "QUEUED"
    with pytest.raises(QuotaDenied) as denied:
        _admit(waiting)
    assert denied.value.field == "gpu_hours_per_month"
    assert "budget of 1 GPU-h used" in denied.value.message
    assert _admit(submit_job(member, gpu_milli=None, gpus=0)).status == "ADMITTED"  # CPU jobs still run

    budget_grant(team=team, gpu_hours=5.0, actor=quota_admin, reason="paper deadline")

    assert _admit(waiting).status == "ADMITTED"
    grant = QuotaEvent.objects.get(team=team, kind="budget_grant")
    assert grant.actor == quota_admin.username and "5 extra GPU-h" in grant.message
    assert quota_usage(team=team).budget_gpu_hours == 6.0


def test_a_team_past_80_percent_of_its_budget_gets_one_warning_a_month(submit_job, member, team) -> None:
    Quota.objects.filter(team=team).update(gpu_hours_per_month=10.0)
    first = _admit(submit_job(member, gpu_milli=None, gpus=1))
    Job.objects.filter(pk=first.pk).update(started_at=timezone.now() - timedelta(hours=7))
    _admit(submit_job(member, gpu_milli=None, gpus=1))  # 7 of 10 GPU-h: no warning yet
    assert not QuotaEvent.objects.filter(kind="budget_warning").exists()

    Job.objects.filter(pk=first.pk).update(started_at=timezone.now() - timedelta(hours=8.5))
    _admit(submit_job(member, gpu_milli=None, gpus=1))
    _admit(submit_job(member, gpu_milli=None, gpus=1))

    (warning,) = QuotaEvent.objects.filter(team=team, kind="budget_warning")
    assert "of its 10 GPU-h budget this month" in warning.message
    assert quota_usage(team=team).budget_warning is True


def test_a_grant_must_be_a_positive_number_of_hours(team, quota_admin) -> None:
    for bad in (0, -3, "many", True):
        with pytest.raises(ValidationError) as error:
            budget_grant(team=team, gpu_hours=bad, actor=quota_admin)
        assert "gpu_hours" in error.value.message_dict
    assert not QuotaEvent.objects.exists()


def test_quota_set_changes_only_the_named_limits(team) -> None:
    quota_set(team=team, actor="admin", max_gpu_milli=16000, guaranteed_gpu_milli=4000)

    quota = Quota.objects.get(team=team)
    assert (quota.max_gpu_milli, quota.guaranteed_gpu_milli, quota.max_concurrent_jobs) == (16000, 4000, 20)


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"max_gpu_milli": -1}, "max_gpu_milli"),
        ({"max_gpu_milli": "lots"}, "max_gpu_milli"),
        ({"max_concurrent_jobs": 2.5}, "max_concurrent_jobs"),
        ({"used_gpu_milli": 0}, "used_gpu_milli"),
        ({"guaranteed_gpu_milli": 9000}, "guaranteed_gpu_milli"),
    ],
)
def test_quota_set_refuses_bad_limits_and_changes_nothing(limits, field, team) -> None:
    before = Quota.objects.filter(team=team).values().get()

    with pytest.raises(ValidationError) as error:
        quota_set(team=team, actor="admin", **limits)

    assert field in error.value.message_dict
    assert Quota.objects.filter(team=team).values().get() == before


def test_the_api_refuses_bad_limits_with_field_messages(quota_admin, team, api_client_for) -> None:
    response = api_client_for(quota_admin).patch(
        f"/api/v1/quotas/{team.pk}/", {"max_gpu_milli": -5, "used_jobs": 0}, format="json"
    )

    assert response.status_code == 400
    assert set(response.json()["extra"]["fields"]) == {"used_jobs"}  # unknown fields are named first
    assert Quota.objects.get(team=team).max_gpu_milli == 8000


def test_the_admin_changes_limits_through_quota_set(client, team) -> None:
    admin = User.objects.create_superuser("root", password="root-password-1")
    client.force_login(admin)
    quota = Quota.objects.get(team=team)
    # The admin's form is in GPUs; quota_set stores milli-GPU.
    form = {
        "guaranteed_gpus": "9",  # above the maximum: quota_set refuses it
        "max_gpus": "8",
        "max_concurrent_jobs": "5",
        "gpu_hours_per_month": "100",
        "per_user_gpus": "2",
    }

    refused = client.post(f"/admin/quotas/quota/{quota.pk}/change/", form)
    assert refused.status_code == 200
    assert "cannot exceed the maximum" in refused.content.decode()
    assert Quota.objects.get(team=team).max_concurrent_jobs == 20

    response = client.post(f"/admin/quotas/quota/{quota.pk}/change/", {**form, "guaranteed_gpus": "1"})

    assert response.status_code == 302
    quota.refresh_from_db()
    assert (quota.guaranteed_gpu_milli, quota.max_concurrent_jobs, quota.per_user_gpu_milli) == (
        1000,
        5,
        2000,
    )
    assert quota_usage(team=team).max_concurrent_jobs == 5


def test_a_preempted_job_waiting_in_the_queue_uses_no_gpu_hours_meanwhile(submit_job, member, team) -> None:
    # Mid-month, so that every hour below falls in this month.
    with time_machine.travel(NOW, tick=True):
        job = submit_job(member, gpu_milli=None, gpus=2)
        for status in (JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING):
            job_transition(job=job, to=status, actor="t")
        Job.objects.filter(pk=job.pk).update(run_started_at=timezone.now() - timedelta(hours=1))
        for status in (JobStatus.PREEMPTING, JobStatus.REQUEUED, JobStatus.QUEUED):
            job_transition(job=job, to=status, actor="t")
        Job.objects.filter(pk=job.pk).update(
            started_at=timezone.now() - timedelta(hours=5)
        )  # first run long ago

        assert gpu_hours_this_month(team=team) == pytest.approx(2.0, rel=1e-3)  # 2 GPUs x 1 h run, not 5 h

        for status in (JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING):
            job_transition(job=job, to=status, actor="t")
        Job.objects.filter(pk=job.pk).update(run_started_at=timezone.now() - timedelta(minutes=30))
        assert gpu_hours_this_month(team=team) == pytest.approx(3.0, rel=1e-3)  # plus the current run


def test_the_quota_api_shows_borrowing_fair_share_budget_and_waiting_jobs(
    submit_job, member, team, api_client_for
) -> None:
    Quota.objects.filter(team=team).update(guaranteed_gpu_milli=1000, lending_limit_gpu_milli=500)
    _admit(submit_job(member, gpu_milli=None, gpus=2))
    waiting = submit_job(member, gpu_milli=None, gpus=1)
    Job.objects.filter(pk=waiting.pk).update(pending_reason="waiting for quota: team Vision uses 8 of 8 GPUs")

    (usage,) = api_client_for(member).get("/api/v1/quotas/").json()

    assert (usage["guaranteed_gpu_milli"], usage["borrowed_gpu_milli"]) == (1000, 1000)
    assert usage["lending_limit_gpu_milli"] == 500
    assert usage["fair_share_factor"] == 1.0 and usage["decayed_gpu_hours"] == 0.0  # nothing ran yet
    assert (usage["budget_gpu_hours"], usage["budget_warning"]) == (1000.0, False)
    assert usage["waiting_jobs"] == [
        {
            "job_id": waiting.pk,
            "name": waiting.name,
            "reason": "waiting for quota: team Vision uses 8 of 8 GPUs",
        }
    ]


def test_decayed_usage_and_fair_share_come_from_the_run_ledger(submit_job, member, team, other_team) -> None:
    Quota.objects.filter(team__in=[team, other_team]).update(guaranteed_gpu_milli=1000)
    job = _admit(submit_job(member, gpu_milli=None, gpus=2))
    RunUsage.objects.create(
        team=team, job=job, started_at=NOW - timedelta(days=7, hours=1), ended_at=NOW - timedelta(days=7),
        gpus=2, gpu_milli=2000, gpu_seconds=7200.0, ended_as="SUCCEEDED",
    )  # fmt: skip

    with time_machine.travel(NOW, tick=False):
        mine, theirs = quota_usage(team=team), quota_usage(team=other_team)

    # 2 GPU-hours one half-life ago count about 1 (the hour's own decay aside).
    assert mine.decayed_gpu_hours == pytest.approx(1.0, rel=5e-3)
    assert mine.fair_share_factor == pytest.approx(2**-2)  # all the usage on half the weight
    assert theirs.fair_share_factor == 1.0


def test_a_quota_admin_sets_a_lending_limit_and_grants_hours_through_the_api(
    quota_admin, team, api_client_for
) -> None:
    client = api_client_for(quota_admin)

    patched = client.patch(f"/api/v1/quotas/{team.pk}/", {"lending_limit_gpu_milli": 2000}, format="json")
    granted = client.post(
        f"/api/v1/quotas/{team.pk}/grants/", {"gpu_hours": 50, "reason": "deadline"}, format="json"
    )
    cleared = client.patch(f"/api/v1/quotas/{team.pk}/", {"lending_limit_gpu_milli": None}, format="json")
    refused = client.post(f"/api/v1/quotas/{team.pk}/grants/", {"gpu_hours": -1}, format="json")

    assert patched.json()["lending_limit_gpu_milli"] == 2000
    assert (granted.status_code, granted.json()["budget_gpu_hours"]) == (201, 1050.0)
    assert cleared.json()["lending_limit_gpu_milli"] is None
    assert refused.status_code == 400 and "gpu_hours" in refused.json()["extra"]["fields"]
    kinds = list(QuotaEvent.objects.filter(team=team).order_by("id").values_list("kind", flat=True))
    assert kinds == ["limits_set", "budget_grant", "limits_set"]

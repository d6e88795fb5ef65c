"""job_cancel: queued jobs stop at once and release quota; jobs on the cluster go to STOPPING and a stop
is requested on commit; finished jobs are a conflict; only the submitter or a team owner may cancel."""

from __future__ import annotations

from unittest import mock

import pytest
from django.core.exceptions import PermissionDenied

from jobs.models import Job, JobEvent
from jobs.services import JobConflict, job_cancel, job_clone, job_transition
from jobs.states import JobStatus
from quotas.models import Quota

pytestmark = pytest.mark.django_db


def _move(job: Job, *path: JobStatus) -> Job:
    for status in path:
        job_transition(job=job, to=status, actor="scheduler")
    return job


def test_cancelling_a_queued_job_stops_it_holding_no_quota(submit_job, member, team) -> None:
    job = submit_job(member)
    assert Quota.objects.get(team=team).used_gpu_milli == 0  # quota is taken at admission

    job_cancel(job=job, user=member)

    assert job.status == JobStatus.STOPPED.value
    assert job.finished_at is not None
    assert Quota.objects.get(team=team).used_gpu_milli == 0
    last = JobEvent.objects.filter(job=job).last()
    assert (last.from_status, last.to_status, last.actor) == ("QUEUED", "STOPPED", member.username)


@pytest.mark.parametrize(
    "path",
    [
        [JobStatus.ADMITTED],
        [JobStatus.ADMITTED, JobStatus.STARTING],
        [JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING],
    ],
    ids=["admitted", "starting", "running"],
)
def test_cancelling_a_job_on_the_cluster_asks_the_backend_to_stop_it(
    path, submit_job, member, team, django_capture_on_commit_callbacks
) -> None:
    job = _move(submit_job(member), *path)

    with (
        mock.patch("jobs.dispatch._enqueue") as enqueue,
        django_capture_on_commit_callbacks(execute=True),
    ):
        job_cancel(job=job, user=member)

    assert job.status == JobStatus.STOPPING.value
    enqueue.assert_called_once_with("stop_job", job.pk)
    assert Quota.objects.get(team=team).used_gpu_milli == 250  # held until the tasks are gone


def test_cancelling_a_stopping_job_again_only_repeats_the_stop_request(
    submit_job, member, django_capture_on_commit_callbacks
) -> None:
    job = _move(submit_job(member), JobStatus.ADMITTED)
    job_cancel(job=job, user=member)
    events = JobEvent.objects.filter(job=job).count()

    with mock.patch("jobs.dispatch._enqueue") as enqueue, django_capture_on_commit_callbacks(execute=True):
        job_cancel(job=job, user=member)

    assert job.status == JobStatus.STOPPING.value
    assert JobEvent.objects.filter(job=job).count() == events
    enqueue.assert_called_once_with("stop_job", job.pk)


def test_cancelling_a_stopped_job_changes_nothing(submit_job, member) -> None:
    job = submit_job(member)
    job_cancel(job=job, user=member)
    events = JobEvent.objects.filter(job=job).count()

    assert job_cancel(job=job, user=member).status == JobStatus.STOPPED.value
    assert JobEvent.objects.filter(job=job).count() == events


@pytest.mark.parametrize("end", [JobStatus.SUCCEEDED, JobStatus.FAILED])
def test_a_finished_job_cannot_be_cancelled(end, submit_job, member) -> None:
    job = _move(submit_job(member), JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING, end)

    with pytest.raises(JobConflict, match="already finished"):
        job_cancel(job=job, user=member)
    job.refresh_from_db()
    assert job.status == end.value


def test_a_team_owner_may_cancel_a_members_job(submit_job, member, owner) -> None:
    job = submit_job(member)
    job_cancel(job=job, user=owner)
    assert job.status == JobStatus.STOPPED.value


@pytest.mark.parametrize("persona", ["viewer", "outsider"])
def test_viewers_and_outsiders_may_not_cancel(persona, request, submit_job, member) -> None:
    job = submit_job(member)

    with pytest.raises(PermissionDenied):
        job_cancel(job=job, user=request.getfixturevalue(persona))
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED.value


def test_another_member_may_not_cancel_someone_elses_job(submit_job, member, team) -> None:
    from django.contrib.auth.models import User

    from accounts.models import Membership

    colleague = User.objects.create_user("colleague")
    Membership.objects.create(user=colleague, team=team, role="member")
    job = submit_job(member)

    with pytest.raises(PermissionDenied):
        job_cancel(job=job, user=colleague)


def test_cancel_follows_a_job_the_scheduler_admitted_meanwhile(submit_job, member) -> None:
    job = submit_job(member)
    stale = Job.objects.get(pk=job.pk)
    _move(job, JobStatus.ADMITTED)  # the scheduler wins the race; `stale` still says QUEUED

    job_cancel(job=stale, user=member)

    assert stale.status == JobStatus.STOPPING.value


def test_clone_submits_the_same_spec_as_a_new_job(submit_job, member, owner, team) -> None:
    original = submit_job(
        member, gpu_milli=300, gpu_memory_mib=2048, env={"LR": "0.1"}, sim_duration_seconds=30
    )

    clone = job_clone(job=original, user=owner)

    assert clone.pk != original.pk
    assert clone.user == owner
    assert clone.status == JobStatus.QUEUED.value
    same = ["team_id", "image_id", "command", "env", "gpu_milli", "gpu_memory_mib", "sim_duration_seconds"]
    assert [getattr(clone, f) for f in same] == [getattr(original, f) for f in same]
    assert JobEvent.objects.get(job=clone, to_status="SUBMITTED").reason == f"clone of job {original.pk}"
    assert Quota.objects.get(team=team).used_gpu_milli == 0  # queued jobs hold no quota before admission

"""job_submit: validation, admission against the quota, DRAFT -> SUBMITTED -> QUEUED with events, and a
scheduling cycle requested once the transaction commits."""

from __future__ import annotations

from unittest import mock

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from images.models import JobImage
from jobs.models import Job, JobEvent
from jobs.services import QUEUED_REASON, job_submit
from jobs.states import JobStatus
from quotas.models import Quota, UsageEntry
from quotas.services import QuotaDenied

pytestmark = pytest.mark.django_db


def test_it_queues_a_valid_job_with_its_story_in_events(submit_job, member) -> None:
    job = submit_job(member, gpu_milli=250, gpu_memory_mib=4096)

    assert job.status == JobStatus.QUEUED.value
    assert job.pending_reason == QUEUED_REASON
    assert job.submitted_at is not None
    story = list(JobEvent.objects.filter(job=job).values_list("from_status", "to_status"))
    assert story == [("", "DRAFT"), ("DRAFT", "SUBMITTED"), ("SUBMITTED", "QUEUED")]
    assert JobEvent.objects.filter(job=job, to_status="SUBMITTED").get().actor == member.username


def test_it_reserves_the_total_gpu_share_of_all_replicas(submit_job, member, team) -> None:
    job = submit_job(member, gpu_milli=None, gpus=2, replicas=2)

    assert job.total_gpu_milli == 4000
    quota = Quota.objects.get(team=team)
    assert (quota.used_gpu_milli, quota.used_jobs) == (4000, 1)
    assert UsageEntry.objects.get(job=job).gpu_milli == 4000


def test_it_refuses_a_job_over_the_team_quota_and_stores_nothing(submit_job, member, team) -> None:
    submit_job(member, gpu_milli=None, gpus=6)

    with pytest.raises(QuotaDenied) as denied:
        submit_job(member, gpu_milli=None, gpus=3)

    assert denied.value.field == "gpus"
    assert "2 GPU(s) of quota left" in denied.value.message
    assert Job.objects.count() == 1
    assert Quota.objects.get(team=team).used_gpu_milli == 6000


def test_it_refuses_a_job_over_the_per_user_cap(submit_job, member, owner, team) -> None:
    Quota.objects.filter(team=team).update(per_user_gpu_milli=1000)
    submit_job(member, gpu_milli=None, gpus=1)

    with pytest.raises(QuotaDenied, match="per-user cap"):
        submit_job(member, gpu_milli=500)
    assert submit_job(owner, gpu_milli=500).status == "QUEUED"  # another user still fits


def test_it_refuses_more_concurrent_jobs_than_the_quota_allows(submit_job, member, team) -> None:
    Quota.objects.filter(team=team).update(max_concurrent_jobs=1)
    submit_job(member, gpu_milli=None, gpus=0)

    with pytest.raises(QuotaDenied) as denied:
        submit_job(member, gpu_milli=None, gpus=0)
    assert denied.value.field == "max_concurrent_jobs"


def test_a_viewer_may_not_submit(submit_job, viewer) -> None:
    with pytest.raises(PermissionDenied):
        submit_job(viewer)
    assert Job.objects.count() == 0


def test_an_outsider_cannot_name_a_team_they_are_not_in(job_spec, outsider, team, image) -> None:
    with pytest.raises(ValidationError) as error:
        job_submit(user=outsider, spec=job_spec(), image=image, team=team.pk)
    assert "team" in error.value.message_dict
    assert Job.objects.count() == 0


def test_the_team_may_be_omitted_when_the_user_writes_to_exactly_one(job_spec, member, team, image) -> None:
    job = job_submit(user=member, spec=job_spec(), image=image.reference)
    assert job.team == team


def test_the_team_may_be_named_by_slug(job_spec, member, team, image) -> None:
    assert job_submit(user=member, spec=job_spec(), image=image.pk, team="vision").team == team


def test_it_refuses_unknown_and_retired_images(job_spec, member, team, image) -> None:
    with pytest.raises(ValidationError) as unknown:
        job_submit(user=member, spec=job_spec(), image="nope:1", team=team)
    JobImage.objects.filter(pk=image.pk).update(is_active=False)
    with pytest.raises(ValidationError) as retired:
        job_submit(user=member, spec=job_spec(), image=image.pk, team=team)

    assert "Unknown image" in unknown.value.message_dict["image"][0]
    assert "retired" in retired.value.message_dict["image"][0]
    assert Job.objects.count() == 0


def test_it_refuses_an_image_whose_driver_floor_no_node_meets(job_spec, member, team, image) -> None:
    from scheduler.model import ClusterSnapshot, Gpu, Node

    JobImage.objects.filter(pk=image.pk).update(min_driver="999.0")
    old = ClusterSnapshot(nodes=[Node("n1", 8000, 64000, gpus=[Gpu(0, "A100")], driver_version="535.54")])
    backend = mock.Mock(snapshot=mock.Mock(return_value=old))

    with (
        mock.patch("jobs.cluster.get_backend", return_value=backend),
        pytest.raises(ValidationError) as error,
    ):
        job_submit(user=member, spec=job_spec(), image=image.pk, team=team)

    assert "999.0" in error.value.message_dict["image"][0]
    assert Job.objects.count() == 0


def test_it_collects_every_field_error_at_once(job_spec, member, team, image) -> None:
    spec = job_spec(gpus=2, gpu_milli=500, command=[], env={"1BAD": "x", "CUDA_MPS_X": "y"}, replicas=0)

    with pytest.raises(ValidationError) as error:
        job_submit(user=member, spec=spec, image=image, team=team)

    assert set(error.value.message_dict) == {"gpu_milli", "command", "env", "replicas"}


def test_a_scheduling_cycle_is_requested_once_the_submission_commits(
    submit_job, member, django_capture_on_commit_callbacks
) -> None:
    with (
        mock.patch("jobs.dispatch._enqueue") as enqueue,
        django_capture_on_commit_callbacks(execute=True) as callbacks,
    ):
        submit_job(member)

    assert len(callbacks) == 1
    enqueue.assert_called_once_with("run_scheduling_cycle")


def test_a_refused_submission_requests_no_cycle(
    submit_job, member, team, django_capture_on_commit_callbacks
) -> None:
    Quota.objects.filter(team=team).update(max_gpu_milli=0)
    with django_capture_on_commit_callbacks() as callbacks, pytest.raises(QuotaDenied):
        submit_job(member)
    assert callbacks == []

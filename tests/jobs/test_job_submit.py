"""job_submit: validation (a request that could never run is refused), DRAFT -> SUBMITTED -> QUEUED with
events and no quota held, a scheduling cycle requested once the transaction commits; admission
(QUEUED -> ADMITTED) takes the quota or makes the job wait with the reason."""

from __future__ import annotations

from unittest import mock

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from images.models import JobImage
from jobs.models import Job, JobEvent
from jobs.services import QUEUED_REASON, job_submit, job_transition
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


def _admit(job: Job) -> Job:
    job_transition(job=job, to=JobStatus.ADMITTED, actor="scheduler", expected_from=JobStatus.QUEUED)
    return job


def test_a_queued_job_holds_no_quota_and_admission_reserves_all_replicas(submit_job, member, team) -> None:
    job = submit_job(member, gpu_milli=None, gpus=2, replicas=2)
    assert job.total_gpu_milli == 4000
    assert (Quota.objects.get(team=team).used_gpu_milli, UsageEntry.objects.count()) == (0, 0)

    _admit(job)

    quota = Quota.objects.get(team=team)
    assert (quota.used_gpu_milli, quota.used_jobs) == (4000, 1)
    assert UsageEntry.objects.get(job=job, released_at__isnull=True).gpu_milli == 4000


def test_a_job_over_the_free_quota_is_queued_and_waits_at_admission_with_the_reason(
    submit_job, member, team
) -> None:
    _admit(submit_job(member, gpu_milli=None, gpus=6))

    waiting = submit_job(member, gpu_milli=None, gpus=3)
    assert waiting.status == JobStatus.QUEUED.value
    with pytest.raises(QuotaDenied) as denied:
        _admit(waiting)

    assert denied.value.field == "max_gpu_milli"
    assert denied.value.message == "waiting for quota: team Vision uses 6 of 8 GPUs"
    waiting.refresh_from_db()
    assert waiting.status == JobStatus.QUEUED.value
    assert Quota.objects.get(team=team).used_gpu_milli == 6000
    assert UsageEntry.objects.filter(job=waiting).count() == 0


def test_admission_honours_the_per_user_cap(submit_job, member, owner, team) -> None:
    Quota.objects.filter(team=team).update(per_user_gpu_milli=1000)
    _admit(submit_job(member, gpu_milli=None, gpus=1))

    with pytest.raises(QuotaDenied, match="per-user cap"):
        _admit(submit_job(member, gpu_milli=500))
    assert _admit(submit_job(owner, gpu_milli=500)).status == "ADMITTED"  # another user still fits


def test_admission_honours_the_maximum_of_concurrent_jobs(submit_job, member, team) -> None:
    Quota.objects.filter(team=team).update(max_concurrent_jobs=1)
    _admit(submit_job(member, gpu_milli=None, gpus=0))

    with pytest.raises(QuotaDenied) as denied:
        _admit(submit_job(member, gpu_milli=None, gpus=0))
    assert denied.value.field == "max_concurrent_jobs"
    assert "runs 1 of 1 concurrent jobs" in denied.value.message


def test_preemption_releases_the_quota_and_the_next_admission_takes_it_again(
    submit_job, member, team
) -> None:
    job = _admit(submit_job(member, gpu_milli=None, gpus=2))
    for status in (JobStatus.STARTING, JobStatus.RUNNING, JobStatus.PREEMPTING, JobStatus.REQUEUED):
        job_transition(job=job, to=status, actor="t")
    assert Quota.objects.get(team=team).used_gpu_milli == 0

    job_transition(job=job, to=JobStatus.QUEUED, actor="t")
    _admit(job)

    assert Quota.objects.get(team=team).used_gpu_milli == 2000
    assert (
        list(UsageEntry.objects.filter(job=job).order_by("id").values_list("released_at", flat=True))[1]
        is None
    )
    assert UsageEntry.objects.filter(job=job).count() == 2


def test_a_job_beyond_the_teams_maximum_can_never_run_and_is_refused(submit_job, member, team) -> None:
    with pytest.raises(ValidationError) as error:
        submit_job(member, gpu_milli=None, gpus=1, replicas=9)

    assert "team Vision's maximum is 8, so it could never run" in error.value.message_dict["gpus"][0]
    assert Job.objects.count() == 0


def _cluster(*nodes):
    from scheduler.model import ClusterSnapshot

    backend = mock.Mock(snapshot=mock.Mock(return_value=ClusterSnapshot(nodes=list(nodes))))
    return mock.patch("jobs.cluster.get_backend", return_value=backend)


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"gpu_milli": None, "gpus": 3}, "gpus", "No node has 3 GPUs for one task (the most on a node is 2)"),
        ({"gpu_models": ["H100"]}, "gpu_models", "No node has a GPU of model H100; the cluster has A100"),
        (
            {"gpu_memory_mib": 90000},
            "gpu_memory_mib",
            "No GPU has 90000 MiB of memory (the largest has 40960",
        ),
        ({"cpu_milli": 64000}, "cpu_milli", "No node has 64000 milli-CPU"),
    ],
    ids=["gpus-per-task", "gpu-model", "gpu-memory", "cpu"],
)
def test_a_request_no_node_could_hold_is_refused_with_the_reason(
    overrides, field, words, job_spec, member, team, image, django_capture_on_commit_callbacks
) -> None:
    from scheduler.model import Gpu, Node

    node = Node("n1", 32000, 256000, gpus=[Gpu(0, "A100", 40960), Gpu(1, "A100", 40960)])
    with (
        _cluster(node),
        django_capture_on_commit_callbacks() as callbacks,
        pytest.raises(ValidationError) as error,
    ):
        job_submit(user=member, spec=job_spec(**overrides), image=image, team=team)

    assert words in error.value.message_dict[field][0]
    assert Job.objects.count() == 0 and callbacks == []


def test_urgent_priority_is_for_users_an_admin_allowed(job_spec, member, team, image) -> None:
    with pytest.raises(ValidationError) as error:
        job_submit(user=member, spec=job_spec(priority=500), image=image, team=team)
    assert "urgent" in error.value.message_dict["priority"][0]

    Quota.objects.get(team=team).urgent_users.add(member)
    assert job_submit(user=member, spec=job_spec(priority=500), image=image, team=team).priority == 500


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
    with django_capture_on_commit_callbacks() as callbacks, pytest.raises(ValidationError):
        submit_job(member)
    assert callbacks == []

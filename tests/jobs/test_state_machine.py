"""job_transition owns the table of legal edges: every legal edge works and leaves a JobEvent, every
other edge is refused and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job, JobEvent
from jobs.services import IllegalTransition, job_transition
from jobs.states import HOLDS_QUOTA, LEGAL_TRANSITIONS, JobStatus
from quotas.models import Quota, UsageEntry
from quotas.services import quota_reserve

LEGAL = [(source, target) for source, targets in LEGAL_TRANSITIONS.items() for target in sorted(targets)]
ILLEGAL = [
    (source, target)
    for source in JobStatus
    for target in JobStatus
    if target not in LEGAL_TRANSITIONS[source]
]


def _job_in(status: JobStatus, *, team: Any, user: Any, image: Any) -> Job:
    job = Job.objects.create(
        name="j", team=team, user=user, image=image, command=["true"], gpus=1, status=status.value
    )
    if status in HOLDS_QUOTA:
        quota_reserve(job=job, team=team, user_id=user.pk, gpu_milli=job.total_gpu_milli)
    return job


def test_the_table_covers_every_status() -> None:
    assert set(LEGAL_TRANSITIONS) == set(JobStatus)


@pytest.mark.django_db
@pytest.mark.parametrize(("source", "target"), LEGAL, ids=[f"{s}->{t}" for s, t in LEGAL])
def test_every_legal_edge_succeeds_and_records_an_event(source, target, team, member, image) -> None:
    job = _job_in(source, team=team, user=member, image=image)

    changed = job_transition(job=job, to=target, actor="tester", reason="because", failure_category="OOM")

    assert changed is True
    job.refresh_from_db()
    assert job.status == target.value
    event = JobEvent.objects.get(job=job)
    assert (event.from_status, event.to_status, event.actor, event.reason) == (
        source.value,
        target.value,
        "tester",
        "because",
    )
    if target.is_terminal:
        assert job.finished_at is not None
    if target is JobStatus.FAILED:
        assert job.failure_category == "OOM"


@pytest.mark.django_db
@pytest.mark.parametrize(("source", "target"), ILLEGAL, ids=[f"{s}->{t}" for s, t in ILLEGAL])
def test_every_illegal_edge_is_refused_and_changes_nothing(source, target, team, member, image) -> None:
    job = _job_in(source, team=team, user=member, image=image)

    with pytest.raises(IllegalTransition):
        job_transition(job=job, to=target, actor="tester")

    job.refresh_from_db()
    assert job.status == source.value
    assert not JobEvent.objects.filter(job=job).exists()


@pytest.mark.django_db
def test_compare_and_set_refuses_a_job_that_moved_on(team, member, image) -> None:
    job = _job_in(JobStatus.RUNNING, team=team, user=member, image=image)

    changed = job_transition(job=job, to=JobStatus.SUCCEEDED, actor="sync", expected_from=JobStatus.STARTING)

    assert changed is False
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING.value
    assert not JobEvent.objects.filter(job=job).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("target", [JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPING])
def test_quota_is_released_exactly_when_the_job_stops_holding_it(target, team, member, image) -> None:
    job = _job_in(JobStatus.RUNNING, team=team, user=member, image=image)
    assert Quota.objects.get(team=team).used_gpu_milli == 1000

    job_transition(job=job, to=target, actor="sync")

    still_held = target in HOLDS_QUOTA
    assert Quota.objects.get(team=team).used_gpu_milli == (1000 if still_held else 0)
    assert (UsageEntry.objects.get(job=job).released_at is None) is still_held


@pytest.mark.django_db
def test_a_preemption_goes_through_preempting_and_requeued_releasing_its_quota(team, member, image) -> None:
    job = _job_in(JobStatus.RUNNING, team=team, user=member, image=image)

    for status in (JobStatus.PREEMPTING, JobStatus.REQUEUED, JobStatus.QUEUED):
        assert job_transition(job=job, to=status, actor="scheduler", reason=f"to {status}")

    assert list(JobEvent.objects.filter(job=job).values_list("to_status", flat=True)) == [
        "PREEMPTING",
        "REQUEUED",
        "QUEUED",
    ]
    # Quota is released on preemption and taken again when the cycle admits the job anew.
    assert Quota.objects.get(team=team).used_gpu_milli == 0
    job.refresh_from_db()
    assert job.preempted_at is not None  # kept until the next run starts: its restart is time lost too


@pytest.mark.django_db
@pytest.mark.parametrize("target", [JobStatus.RUNNING, JobStatus.QUEUED, JobStatus.PREEMPTING])
def test_a_preempting_job_cannot_skip_its_requeue_or_run_again(target, team, member, image) -> None:
    job = _job_in(JobStatus.PREEMPTING, team=team, user=member, image=image)

    with pytest.raises(IllegalTransition):
        job_transition(job=job, to=target, actor="tester")


@pytest.mark.django_db
@pytest.mark.parametrize("source", [JobStatus.QUEUED, JobStatus.ADMITTED, JobStatus.STARTING])
def test_only_a_running_job_can_be_preempted(source, team, member, image) -> None:
    job = _job_in(source, team=team, user=member, image=image)

    with pytest.raises(IllegalTransition):
        job_transition(job=job, to=JobStatus.PREEMPTING, actor="scheduler")

"""A job's borrowed mark follows its team's usage: the team's excess over its guarantee, on its newest
admissions, again at every admission, release and guarantee change (quotas.services), as the job's
detail shows it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User

from accounts.models import Team
from jobs.models import Job
from jobs.services import job_transition
from jobs.states import JobStatus
from quotas.models import Quota, UsageEntry
from quotas.services import quota_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def roomy(team: Team) -> Team:
    Quota.objects.filter(team=team).update(max_gpu_milli=16_000, per_user_gpu_milli=16_000)
    return team


def _admit(submit_job: Callable[..., Job], member: User, gpus: int) -> Job:
    job = submit_job(member, gpu_milli=None, gpus=gpus)
    job_transition(job=job, to=JobStatus.ADMITTED, actor="scheduler")
    return job


def _end(job: Job) -> None:
    for status in (JobStatus.STARTING, JobStatus.RUNNING, JobStatus.SUCCEEDED):
        job_transition(job=job, to=status, actor="t")


def _marks(*jobs: Job) -> list[int]:
    open_marks = dict(
        UsageEntry.objects.filter(released_at__isnull=True).values_list("job_id", "borrowed_gpu_milli")
    )
    return [open_marks.get(job.pk, 0) for job in jobs]


def test_a_borrower_is_no_longer_marked_once_the_older_job_within_the_guarantee_ends(
    roomy, submit_job, member, api_client_for
) -> None:
    Quota.objects.filter(team=roomy).update(guaranteed_gpu_milli=8000)
    a = _admit(submit_job, member, 8)
    b = _admit(submit_job, member, 4)
    client = api_client_for(member)
    assert _marks(a, b) == [0, 4000]
    assert client.get(f"/api/v1/jobs/{b.pk}/").json()["borrowed_gpu_milli"] == 4000

    _end(a)

    # The team holds 4 of its 8 guaranteed GPUs: nothing is borrowed.
    assert _marks(b) == [0]
    assert client.get(f"/api/v1/jobs/{b.pk}/").json()["borrowed_gpu_milli"] == 0


def test_the_excess_stays_on_the_newest_admissions_when_an_older_one_ends(roomy, submit_job, member) -> None:
    Quota.objects.filter(team=roomy).update(guaranteed_gpu_milli=2000)
    first = _admit(submit_job, member, 2)
    second = _admit(submit_job, member, 1)
    third = _admit(submit_job, member, 2)
    assert _marks(first, second, third) == [0, 1000, 2000]

    _end(first)

    # 3 GPUs held, 1 beyond the guarantee: the newest carries it, in part.
    assert _marks(second, third) == [0, 1000]


def test_a_new_guarantee_marks_the_team_again(roomy, submit_job, member, quota_admin, api_client_for) -> None:
    Quota.objects.filter(team=roomy).update(guaranteed_gpu_milli=2000)
    older = _admit(submit_job, member, 2)
    newer = _admit(submit_job, member, 2)
    assert _marks(older, newer) == [0, 2000]

    quota_set(team=roomy, actor=quota_admin, guaranteed_gpu_milli=1000)
    assert _marks(older, newer) == [1000, 2000]

    patched = api_client_for(quota_admin).patch(
        f"/api/v1/quotas/{roomy.pk}/", {"guaranteed_gpu_milli": 4000}, format="json"
    )
    assert patched.status_code == 200
    assert _marks(older, newer) == [0, 0]
    assert api_client_for(member).get(f"/api/v1/jobs/{older.pk}/").json()["borrowed_gpu_milli"] == 0


def test_with_no_guarantee_every_admission_is_marked_in_full_also_those_marked_before_the_change(
    roomy, submit_job, member, quota_admin
) -> None:
    Quota.objects.filter(team=roomy).update(guaranteed_gpu_milli=4000)
    older = _admit(submit_job, member, 2)
    newer = _admit(submit_job, member, 1)
    assert _marks(older, newer) == [0, 0]

    quota_set(team=roomy, actor=quota_admin, guaranteed_gpu_milli=0)

    assert _marks(older, newer) == [2000, 1000]

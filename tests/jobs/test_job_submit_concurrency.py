"""Quota under real concurrency against PostgreSQL: 50 threads submitting 1-GPU jobs to a team with 8
GPUs of quota are all accepted as QUEUED (quota is taken at admission, not at submit), and 50
concurrent admissions of them admit exactly 8; the others wait with the reason, none fails."""

from __future__ import annotations

import threading
from collections import Counter
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections

from accounts.models import Membership, Role
from accounts.services import token_create
from jobs.models import Job
from quotas.models import Quota, UsageEntry, UserUsage
from quotas.services import QuotaDenied

THREADS = 50
QUOTA_GPUS = 8

requires_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="row locks (SELECT ... FOR UPDATE) are what is under test; SQLite serialises all writers",
)


def _run_concurrently(work, count: int) -> list:
    """Run ``work(i)`` in ``count`` threads released together; each closes its DB connection."""
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except Exception as exc:  # noqa: BLE001  (recorded and asserted on below)
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_submissions_beyond_the_quota_queue_and_admissions_never_overshoot(
    team, image
) -> None:
    from rest_framework.test import APIClient

    Quota.objects.filter(team=team).update(
        max_gpu_milli=QUOTA_GPUS * 1000, per_user_gpu_milli=QUOTA_GPUS * 1000, max_concurrent_jobs=THREADS
    )
    # Five researchers, ten requests each: contention on the team row and on per-user rows.
    users = [User.objects.create_user(f"researcher{i}", password="pw-123456789") for i in range(5)]
    for user in users:
        Membership.objects.create(user=user, team=team, role=Role.MEMBER)
    tokens = [token_create(user=user)[1] for user in users]
    body = {"team": team.pk, "image": image.pk, "command": ["python", "train.py"], "gpus": 1}

    def submit(i: int):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {tokens[i % len(tokens)]}")
        return client.post("/api/v1/jobs/", body, format="json")

    # The request handler's one-time set-up (middleware, metrics) is not under test: done once first.
    APIClient().get("/api/v1/health/")
    # A trigger of an earlier test (or run) may have left the pending mark; the coalescing counted
    # below starts from none, as after a cycle began.
    from jobs.dispatch import cycle_started

    cycle_started()
    # The enqueue after commit is the runtime's business; here only admission is under test.
    with mock.patch("jobs.dispatch._enqueue") as enqueue:
        responses = _run_concurrently(submit, THREADS)

    errors = [r for r in responses if isinstance(r, Exception)]
    assert errors == []
    assert Counter(r.status_code for r in responses) == {201: THREADS}
    assert Job.objects.filter(team=team, status="QUEUED").count() == THREADS
    quota = Quota.objects.get(team=team)
    assert (quota.used_gpu_milli, quota.used_jobs) == (0, 0)  # nothing held before admission
    # Triggers are coalesced: the accepted jobs asked for cycles, and one message went out (the mocked
    # enqueue never starts the cycle that would clear the pending mark).
    assert enqueue.call_count == 1
    assert [c.args for c in enqueue.call_args_list] == [("run_scheduling_cycle",)]

    admitted = _admit_concurrently(list(Job.objects.filter(team=team).order_by("pk")))

    assert sum(isinstance(r, bool) and r for r in admitted) == QUOTA_GPUS
    waits = [r for r in admitted if isinstance(r, QuotaDenied)]
    assert len(waits) == THREADS - QUOTA_GPUS
    assert {w.message for w in waits} == {"waiting for quota: team Vision uses 8 of 8 GPUs"}
    quota.refresh_from_db()
    assert (quota.used_gpu_milli, quota.used_jobs) == (QUOTA_GPUS * 1000, QUOTA_GPUS)
    assert Job.objects.filter(team=team, status="ADMITTED").count() == QUOTA_GPUS
    assert Job.objects.filter(team=team, status="QUEUED").count() == THREADS - QUOTA_GPUS
    assert UsageEntry.objects.filter(released_at__isnull=True).count() == QUOTA_GPUS
    assert sum(UserUsage.objects.values_list("used_gpu_milli", flat=True)) == QUOTA_GPUS * 1000


def _admit_concurrently(jobs: list[Job]) -> list:
    """Admit each job (QUEUED -> ADMITTED, which takes its quota) in its own thread, all at once."""
    from jobs.services import job_transition
    from jobs.states import JobStatus

    def admit(i: int):
        return job_transition(
            job=jobs[i], to=JobStatus.ADMITTED, actor="scheduler", expected_from=JobStatus.QUEUED
        )

    return _run_concurrently(admit, len(jobs))


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_admissions_respect_the_per_user_cap(team, image, member, job_spec) -> None:
    from jobs.services import job_submit

    Quota.objects.filter(team=team).update(
        max_gpu_milli=100_000, per_user_gpu_milli=3000, max_concurrent_jobs=100
    )

    def submit(i: int):
        return job_submit(user=member, spec=job_spec(gpu_milli=None, gpus=1), image=image, team=team)

    with mock.patch("jobs.dispatch._enqueue"):
        results = _run_concurrently(submit, 20)
    assert all(isinstance(r, Job) for r in results)

    admitted = _admit_concurrently(results)

    assert sum(r is True for r in admitted) == 3
    assert all(r is True or isinstance(r, QuotaDenied) for r in admitted)
    assert UserUsage.objects.get(team=team, user=member).used_gpu_milli == 3000

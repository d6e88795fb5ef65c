"""Quota admission under real concurrency against PostgreSQL: 50 threads submitting 1-GPU jobs to a team
with 8 GPUs of quota admit exactly 8; every other request gets a clear quota error, none a 500."""

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
def test_fifty_concurrent_api_submissions_admit_exactly_the_quota(team, image) -> None:
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

    # The enqueue after commit is the runtime's business; here only admission is under test.
    with mock.patch("jobs.dispatch._enqueue") as enqueue:
        responses = _run_concurrently(submit, THREADS)

    errors = [r for r in responses if isinstance(r, Exception)]
    assert errors == []
    codes = Counter(r.status_code for r in responses)
    assert codes == {201: QUOTA_GPUS, 409: THREADS - QUOTA_GPUS}
    for refused in (r for r in responses if r.status_code == 409):
        assert refused.json()["code"] == "quota_exceeded"
        assert "GPU(s) of quota left" in refused.json()["message"]
    quota = Quota.objects.get(team=team)
    assert (quota.used_gpu_milli, quota.used_jobs) == (QUOTA_GPUS * 1000, QUOTA_GPUS)
    assert Job.objects.filter(team=team, status="QUEUED").count() == QUOTA_GPUS
    assert Job.objects.count() == QUOTA_GPUS  # refused submissions left nothing behind
    assert UsageEntry.objects.filter(released_at__isnull=True).count() == QUOTA_GPUS
    assert sum(UserUsage.objects.values_list("used_gpu_milli", flat=True)) == QUOTA_GPUS * 1000
    # Triggers are coalesced: the admitted jobs asked for cycles, and one message went out (the mocked
    # enqueue never starts the cycle that would clear the pending mark); refusals asked for none.
    assert enqueue.call_count == 1
    assert [c.args for c in enqueue.call_args_list] == [("run_scheduling_cycle",)]


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_submissions_respect_the_per_user_cap(team, image, member, job_spec) -> None:
    from jobs.services import job_submit
    from quotas.services import QuotaDenied

    Quota.objects.filter(team=team).update(
        max_gpu_milli=100_000, per_user_gpu_milli=3000, max_concurrent_jobs=100
    )

    def submit(i: int):
        return job_submit(user=member, spec=job_spec(gpu_milli=None, gpus=1), image=image, team=team)

    with mock.patch("jobs.dispatch._enqueue"):
        results = _run_concurrently(submit, 20)

    assert sum(isinstance(r, Job) for r in results) == 3
    assert all(isinstance(r, Job | QuotaDenied) for r in results)
    assert UserUsage.objects.get(team=team, user=member).used_gpu_milli == 3000

"""Job answers built from jobs.representation's plan are the answers DRF's own per-field path builds,
key for key and type for type, for jobs in every state; a job list reads no deferred column per row;
the submit's 201 answer is the job as read back, without reading its tasks, events or usage."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any
from unittest import mock

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework import serializers

from jobs import selectors
from jobs.models import Job, Task
from jobs.policy_settings import queue_order_key
from jobs.queue_eta import eta_key
from jobs.representation import PlannedRepresentation, plan_for
from jobs.serializers import JobDetailOutput, JobOutput, TaskOutput
from jobs.services import job_transition
from jobs.states import JobStatus
from quotas.models import UsageEntry

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 3, 12, 0, 0, tzinfo=dt.UTC)
T0 = dt.datetime(2026, 12, 3, 9, 30, 0, 123456, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _frozen(settings, tmp_path) -> Any:
    settings.SIM_STATE_PATH = str(tmp_path / "cluster.json")
    settings.SCHEDULER_POLICY = "ours"  # 2D-LAS levels, so las_level is a number
    with mock.patch.object(timezone, "now", lambda: NOW):
        yield


def _stamp(job: Job, **extra: Any) -> Job:
    """Explicit times on every datetime column, so answers can be written out in full."""
    Job.objects.filter(pk=job.pk).update(created_at=T0, submitted_at=T0, updated_at=T0, **extra)
    return Job.objects.select_related("team", "user", "image").get(pk=job.pk)


def _run(job: Job, *, minutes: int) -> Job:
    for status in (JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING):
        job_transition(job=job, to=status, actor="scheduler", reason="placed")
    for index in range(job.replicas):
        Task.objects.create(
            job=job,
            index=index,
            name=f"job-{job.pk}-{index}",
            node="dgx-2",
            gpu_indices=[0, 1],
            gpu_milli=job.gpu_milli_per_replica,
            phase="RUNNING",
            predicted_slowdown=1.25,
            placement_reason="least fragmentation",
            started_at=T0,
        )
    return _stamp(job, started_at=T0, run_started_at=NOW - dt.timedelta(minutes=minutes))


@pytest.fixture
def jobs(submit_job, member, other_team) -> dict[str, Job]:
    """One job per state the answers differ in."""
    queued = _stamp(submit_job(member, name="waiting", env={"SEED": "1"}, priority=100))
    Job.objects.filter(pk=queued.pk).update(queue_position=1, pending_reason="Insufficient GPUs: 2 free")
    plain_queued = _stamp(submit_job(member, name="no-eta", gpu_milli=None, gpus=1, max_runtime_seconds=600))
    running = _run(submit_job(member, name="running", gpu_milli=None, gpus=2, replicas=2), minutes=30)
    borrowed = _run(submit_job(member, name="borrowing", gpu_milli=None, gpus=1), minutes=5)
    preempted = _run(submit_job(member, name="preempted", gpu_milli=None, gpus=1), minutes=60)
    job_transition(
        job=preempted,
        to=JobStatus.PREEMPTING,
        actor="scheduler",
        reason=f"preempted by rule las-level for job {queued.pk}",
    )
    job_transition(job=preempted, to=JobStatus.REQUEUED, actor="system")
    job_transition(job=preempted, to=JobStatus.QUEUED, actor="system", reason="requeued")
    succeeded = _run(submit_job(member, name="done"), minutes=10)
    job_transition(job=succeeded, to=JobStatus.SUCCEEDED, actor="system")
    failed = _run(submit_job(member, name="crashed"), minutes=2)
    job_transition(job=failed, to=JobStatus.FAILED, actor="system", reason="exit 1", failure_category="USER")
    # Last, as every admission and release marks the team's entries again (quotas.services): a mark
    # the rule would not give (the team has no guarantee: 1000) shows that the answer is the ledger's.
    entry = UsageEntry.objects.filter(job=borrowed, released_at__isnull=True).first()
    if entry is None:
        entry = UsageEntry.objects.create(team=borrowed.team, user=member, job=borrowed, gpu_milli=1000)
    UsageEntry.objects.filter(pk=entry.pk).update(borrowed_gpu_milli=500)
    cache.set(eta_key(), {queued.pk: (NOW.timestamp() + 600, "medium")})
    cache.set(queue_order_key(), "2D-LAS with the Gittins index")
    names = ("queued", "plain_queued", "running", "borrowed", "preempted", "succeeded", "failed")
    found = [queued, plain_queued, running, borrowed, preempted, succeeded, failed]
    return {name: Job.objects.get(pk=job.pk) for name, job in zip(names, found, strict=True)}


def _drf(serializer_class: type, job: Job, context: dict[str, Any]) -> dict[str, Any]:
    """DRF's own answer: Serializer.to_representation, the path JobOutput took before its plan."""
    serializer = serializer_class(context=context)
    return super(PlannedRepresentation, serializer).to_representation(job)  # type: ignore[misc]


def _same(fast: Any, reference: Any) -> None:
    # JSON text, not ==: 1 == 1.0 == True in Python, and dict equality ignores the keys' order.
    assert json.dumps(fast) == json.dumps(reference)


def test_every_job_serializer_has_a_plan() -> None:
    for serializer_class in (JobOutput, JobDetailOutput, TaskOutput):
        assert plan_for(serializer_class) is not None, serializer_class


def test_the_list_and_detail_answers_are_drfs_for_every_state(jobs, member, api_client_for) -> None:
    client = api_client_for(member)
    listed = client.get("/api/v1/jobs/?page_size=500").json()["results"]
    context = {
        "queue_positions": selectors.queue_positions([j.pk for j in jobs.values()]),
        **selectors.queue_cache_context(etas=True),
    }

    assert {item["id"] for item in listed} == {job.pk for job in jobs.values()}
    for item in listed:
        job = Job.objects.select_related("team", "user", "image").get(pk=item["id"])
        _same(item, _drf(JobOutput, job, dict(context)))
        detail = client.get(f"/api/v1/jobs/{job.pk}/").json()
        reference = _drf(JobDetailOutput, Job.objects.prefetch_related("tasks").get(pk=job.pk), dict(context))
        _same(detail, reference)
    details = {name: client.get(f"/api/v1/jobs/{job.pk}/").json() for name, job in jobs.items()}
    # (A preempted job's task rows stay until the binder removes them; nothing removes them here.)
    assert [len(details[name]["tasks"]) for name in jobs] == [0, 0, 2, 1, 1, 1, 1]
    assert details["borrowed"]["borrowed_gpu_milli"] == 500
    assert details["preempted"]["preemption_history"][0]["preemptor"] == jobs["queued"].pk


def test_a_queued_job_in_the_list_is_answered_in_full(jobs, member, team, image, api_client_for) -> None:
    queued = jobs["queued"]
    listed = api_client_for(member).get("/api/v1/jobs/?status=QUEUED").json()["results"]
    item = next(i for i in listed if i["id"] == queued.pk)

    expected = {
        "id": queued.pk, "team": team.pk, "team_slug": "vision", "user": "max", "image": image.pk,
        "image_reference": "pytorch:2.4", "name": "waiting", "command": ["python", "train.py"],
        "args": [], "env": {"SEED": "1"}, "gpus": 0, "gpu_milli": 250, "gpu_memory_mib": 0,
        "gpu_models": [], "cpu_milli": 1000, "memory_mib": 2048, "replicas": 1, "priority": 100,
        "max_runtime_seconds": None, "max_retries": 0, "slowdown_tolerance": 1.5,
        "sim_duration_seconds": None, "preemptible": True, "min_runtime_seconds": 0,
        "allow_sharing": False, "preemption_grace_seconds": None, "kind": "batch", "workspace_app": "",
        "workspace_port": None, "total_gpu_milli": 250, "status": "QUEUED",
        "pending_reason": "Insufficient GPUs: 2 free", "queue_position": 1,
        "queue_order": "2D-LAS with the Gittins index", "attained_gpu_seconds": 0.0,
        "eta": "2026-12-03T12:10:00+00:00", "eta_confidence": "medium", "preemptions": 0,
        "migrations": 0, "time_lost_seconds": 0.0, "failure_category": "", "failure_message": "",
        "retries": 0, "created_at": "2026-12-03T09:30:00.123456Z",
        "submitted_at": "2026-12-03T09:30:00.123456Z", "started_at": None, "finished_at": None,
        "updated_at": "2026-12-03T09:30:00.123456Z",
    }  # fmt: skip
    _same(item, expected)


def test_a_running_job_shows_its_tasks_level_and_service(jobs, member, api_client_for) -> None:
    running = jobs["running"]
    detail = api_client_for(member).get(f"/api/v1/jobs/{running.pk}/").json()

    # Two replicas of two GPUs for 30 minutes: 7,200 GPU-seconds, LAS level 1 (thresholds 1, 10 h).
    assert (detail["status"], detail["attained_gpu_seconds"], detail["las_level"]) == ("RUNNING", 7200.0, 1)
    assert (detail["queue_position"], detail["queue_order"], detail["eta"]) == (None, None, None)
    # The team has no guarantee, so all four GPUs it holds are borrowed.
    assert (detail["priority_class"], detail["borrowed_gpu_milli"], detail["preemption_history"]) == (
        "normal", 4000, [],
    )  # fmt: skip
    assert list(detail)[-5:] == [
        "las_level",
        "preemption_history",
        "borrowed_gpu_milli",
        "priority_class",
        "tasks",
    ]
    _same(
        detail["tasks"][1],
        {
            "index": 1, "name": f"job-{running.pk}-1", "phase": "RUNNING", "node": "dgx-2",
            "gpu_indices": [0, 1], "gpu_milli": 2000, "gpu_memory_mib": 0, "predicted_slowdown": 1.25,
            "placement_reason": "least fragmentation", "exit_code": None, "message": "",
            "started_at": "2026-12-03T09:30:00.123456Z", "finished_at": None,
        },
    )  # fmt: skip


def test_a_job_list_reads_no_column_per_row(jobs, member, api_client_for) -> None:
    # The list loads only the columns its answer reads (selectors.listed_columns); reading another one
    # would cost a query per job, so a page of one and a page of every job cost the same queries
    # (both with a queued job: only then are queue positions read).
    client = api_client_for(member)
    client.get("/api/v1/jobs/?page_size=1")  # the token's first use is written once
    counts = []
    for query in ("status=QUEUED&page_size=1", "page_size=500"):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"/api/v1/jobs/?{query}").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_the_list_builds_no_drf_fields(jobs) -> None:
    page = list(selectors.listed_columns(Job.objects.select_related("team", "user", "image")))
    serializer = JobOutput(page, many=True, context={"queue_positions": {}})

    assert len(serializer.data) == len(jobs)
    assert "fields" not in serializer.child.__dict__  # DRF's cached field set was never built


def test_the_submit_answer_is_the_job_read_back_without_reading_tasks_events_or_usage(
    member, image, api_client_for
) -> None:
    client = api_client_for(member)
    cache.set(queue_order_key(), "2D-LAS with the Gittins index")
    body = {"image": image.pk, "command": ["true"], "gpu_milli": 250, "gpu_request": "share"}
    with CaptureQueriesContext(connection) as queries:
        created = client.post("/api/v1/jobs/", body, format="json")

    assert created.status_code == 201, created.content
    _same(created.json(), client.get(f"/api/v1/jobs/{created.json()['id']}/").json())
    reads = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
    for table in ("jobs_task", "jobs_jobevent", UsageEntry._meta.db_table):
        assert not [sql for sql in reads if f'FROM "{table}"' in sql], table


def test_an_object_the_plan_cannot_read_gets_drfs_answer(image) -> None:
    # An unsaved job has no team or user: DRF answers None for their names (ObjectDoesNotExist).
    draft = Job(name="draft", command=["true"], image=image)
    context = {"queue_positions": {}}

    answer = JobOutput(draft, context=context).data

    assert (answer["team_slug"], answer["user"], answer["image_reference"]) == (None, None, "pytorch:2.4")
    _same(dict(answer), _drf(JobOutput, draft, context))


def test_a_serializer_with_a_field_the_plan_does_not_know_is_left_to_drf(jobs) -> None:
    class Priced(PlannedRepresentation, serializers.ModelSerializer):
        cost = serializers.DecimalField(source="slowdown_tolerance", max_digits=6, decimal_places=2)

        class Meta:
            model = Job
            fields = ["id", "cost"]

    assert plan_for(Priced) is None
    assert Priced(jobs["queued"]).data == {"id": jobs["queued"].pk, "cost": "1.50"}

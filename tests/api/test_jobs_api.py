"""The jobs API beyond access: listing with filters, ordering and a total count; a job's tasks with
their placement; events, logs from the backend, cancel and clone; the cluster view."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache

from accounts.models import Membership
from jobs.cluster import get_backend
from jobs.models import Job, Task
from jobs.policy_settings import queue_order_key
from jobs.services import job_transition
from jobs.states import JobStatus
from scheduler.backends.base import TaskSpec
from scheduler.model import Placement

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _isolated_cluster(settings, tmp_path) -> None:
    settings.SIM_STATE_PATH = str(tmp_path / "cluster.json")


def _place(job: Job, *, node: str = "dgx-1", gpus: tuple[int, ...] = (3,), bind: bool = False) -> Task:
    """What the scheduler and binder do to a job: ADMITTED with a task placed on a GPU."""
    job_transition(job=job, to=JobStatus.ADMITTED, actor="scheduler", reason="placed")
    task = Task.objects.create(
        job=job,
        index=0,
        name=f"job-{job.pk}-0",
        node=node,
        gpu_indices=list(gpus),
        gpu_milli=job.gpu_milli_per_replica,
        gpu_memory_mib=job.gpu_memory_mib,
        predicted_slowdown=1.12,
        placement_reason="least fragmentation; shares GPU 3 with 1 job",
    )
    if bind:
        placement = Placement(
            job_id=str(job.pk), task_id=task.name, node=node, gpu_indices=gpus, gpu_milli=task.gpu_milli
        )
        spec = TaskSpec(job_id=str(job.pk), task_id=task.name, image="pytorch:2.4", command=list(job.command))
        get_backend().bind(spec, placement)
    return task


def test_the_list_counts_all_matches_and_pages_through_them(submit_job, member, api_client_for) -> None:
    for _ in range(5):
        submit_job(member)

    first = api_client_for(member).get("/api/v1/jobs/?page_size=2").json()
    last = api_client_for(member).get("/api/v1/jobs/?page_size=2&page=3").json()

    assert first["count"] == 5
    assert len(first["results"]) == 2
    assert first["next"] is not None
    assert len(last["results"]) == 1
    assert last["next"] is None


def test_the_list_filters_by_status_team_and_user(submit_job, member, owner, team, api_client_for) -> None:
    queued = submit_job(member)
    stopped = submit_job(owner)
    job_transition(job=stopped, to=JobStatus.STOPPED, actor="t")
    client = api_client_for(member)

    def ids(query: str) -> set[int]:
        return {job["id"] for job in client.get(f"/api/v1/jobs/?{query}").json()["results"]}

    assert ids("status=QUEUED") == {queued.pk}
    assert ids("status=QUEUED,STOPPED") == {queued.pk, stopped.pk}
    assert ids(f"user={owner.username}") == {stopped.pk}
    assert ids(f"team={team.pk}") == {queued.pk, stopped.pk}
    assert ids("team_slug=speech") == set()


def test_the_list_orders_by_a_chosen_field(submit_job, member, api_client_for) -> None:
    low = submit_job(member, priority=-5)
    high = submit_job(member, priority=7)

    results = api_client_for(member).get("/api/v1/jobs/?ordering=-priority").json()["results"]

    assert [job["id"] for job in results] == [high.pk, low.pk]


def test_queued_jobs_show_their_reason_and_position(submit_job, member, api_client_for) -> None:
    first = submit_job(member)
    urgent = submit_job(member, priority=10)

    client = api_client_for(member)
    detail = client.get(f"/api/v1/jobs/{first.pk}/").json()

    # Before any cycle: submission order; afterwards the policy's (stored by the cycle).
    assert detail["pending_reason"] == "Waiting for the next scheduling cycle."
    assert detail["queue_position"] == 1
    Job.objects.filter(pk=urgent.pk).update(queue_position=1)
    Job.objects.filter(pk=first.pk).update(queue_position=2)
    cache.set(queue_order_key(), "2D-LAS with the Gittins index")
    detail = client.get(f"/api/v1/jobs/{first.pk}/").json()
    assert (detail["queue_position"], detail["queue_order"]) == (2, "2D-LAS with the Gittins index")
    listed = {j["id"]: j for j in client.get("/api/v1/jobs/").json()["results"]}
    assert listed[urgent.pk]["queue_position"] == 1
    assert listed[urgent.pk]["queue_order"] == "2D-LAS with the Gittins index"


def test_the_detail_shows_attained_service_las_level_and_preemption_history(
    submit_job, member, api_client_for, settings
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    settings.SCHEDULER_POLICY = "ours"  # 2D-LAS levels at 1, 10, 100 and 1,000 GPU-hours
    job = submit_job(member, gpu_milli=None, gpus=2)
    other = submit_job(member)
    for status in (JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING):
        job_transition(job=job, to=status, actor="t")
    Job.objects.filter(pk=job.pk).update(run_started_at=timezone.now() - timedelta(hours=1))
    job_transition(
        job=job,
        to=JobStatus.PREEMPTING,
        actor="scheduler",
        reason=f"preempted by rule las-level for job {other.pk}",
    )
    job_transition(job=job, to=JobStatus.REQUEUED, actor="system")

    detail = api_client_for(member).get(f"/api/v1/jobs/{job.pk}/").json()

    assert detail["attained_gpu_seconds"] == pytest.approx(2 * 3600, rel=1e-3)
    assert detail["las_level"] == 1
    assert detail["time_lost_seconds"] >= 0
    (entry,) = detail["preemption_history"]
    assert (entry["kind"], entry["rule"], entry["preemptor"]) == ("preempted", "las-level", other.pk)
    assert entry["stopped_at"] is not None


def test_a_placed_job_shows_each_task_with_its_placement(submit_job, member, api_client_for) -> None:
    job = submit_job(member, gpu_milli=300, gpu_memory_mib=4096)
    _place(job)

    detail = api_client_for(member).get(f"/api/v1/jobs/{job.pk}/").json()

    assert detail["status"] == "ADMITTED"
    assert detail["queue_position"] is None
    assert detail["tasks"] == [
        {
            "index": 0,
            "name": f"job-{job.pk}-0",
            "phase": "PENDING",
            "node": "dgx-1",
            "gpu_indices": [3],
            "gpu_milli": 300,
            "gpu_memory_mib": 4096,
            "predicted_slowdown": 1.12,
            "placement_reason": "least fragmentation; shares GPU 3 with 1 job",
            "exit_code": None,
            "message": "",
            "started_at": None,
            "finished_at": None,
        }
    ]


def test_logs_come_from_the_cluster_backend(submit_job, member, viewer, api_client_for) -> None:
    job = submit_job(member)
    task = _place(job, bind=True)

    body = api_client_for(viewer).get(f"/api/v1/jobs/{job.pk}/logs/").json()

    assert body["job"] == job.pk
    assert [t["task"] for t in body["tasks"]] == [task.name]
    assert f"task {task.name} bound to dgx-1" in body["tasks"][0]["log"]


def test_logs_of_an_unknown_task_index_are_empty_and_a_bad_index_is_a_400(
    submit_job, member, api_client_for
) -> None:
    job = submit_job(member)
    _place(job, bind=True)
    client = api_client_for(member)

    assert client.get(f"/api/v1/jobs/{job.pk}/logs/?task=5").json()["tasks"] == []
    bad = client.get(f"/api/v1/jobs/{job.pk}/logs/?task=-1")
    assert bad.status_code == 400
    assert "task" in bad.json()["extra"]["fields"]


def test_cancel_over_the_api_answers_with_the_stopped_job(submit_job, member, api_client_for) -> None:
    job = submit_job(member)

    response = api_client_for(member).post(f"/api/v1/jobs/{job.pk}/cancel/")

    assert response.status_code == 200
    assert response.json()["status"] == "STOPPED"
    events = api_client_for(member).get(f"/api/v1/jobs/{job.pk}/events/").json()
    assert [e["to_status"] for e in events] == ["DRAFT", "SUBMITTED", "QUEUED", "STOPPED"]


def test_cancelling_a_finished_job_is_a_409(submit_job, member, api_client_for) -> None:
    job = submit_job(member)
    for status in (JobStatus.ADMITTED, JobStatus.STARTING, JobStatus.RUNNING, JobStatus.SUCCEEDED):
        job_transition(job=job, to=status, actor="t")

    response = api_client_for(member).post(f"/api/v1/jobs/{job.pk}/cancel")

    assert response.status_code == 409
    assert response.json()["code"] == "conflict"


def test_clone_over_the_api_creates_a_new_queued_job(submit_job, member, owner, api_client_for) -> None:
    job = submit_job(member, env={"SEED": "1"})

    response = api_client_for(owner).post(f"/api/v1/jobs/{job.pk}/clone/")

    assert response.status_code == 201
    clone = response.json()
    assert (clone["status"], clone["user"], clone["env"]) == ("QUEUED", owner.username, {"SEED": "1"})
    assert clone["id"] != job.pk


def test_the_cluster_view_hides_other_teams_jobs_on_shared_gpus(
    submit_job, member, outsider, api_client_for
) -> None:
    job = submit_job(member)
    _place(job, bind=True)

    def allocation(user: Any) -> dict[str, Any]:
        view = api_client_for(user).get("/api/v1/cluster/").json()
        node = next(n for n in view["nodes"] if n["name"] == "dgx-1")
        return node["gpus"][3]["allocations"][0]

    mine, theirs = allocation(member), allocation(outsider)
    assert (mine["job_id"], mine["task_id"], mine["gpu_milli"]) == (job.pk, f"job-{job.pk}-0", 250)
    assert (theirs["job_id"], theirs["task_id"], theirs["gpu_milli"], theirs["team"]) == (
        None,
        None,
        250,
        "vision",
    )


def test_urls_work_without_the_trailing_slash(submit_job, member, image, team, api_client_for) -> None:
    client = api_client_for(member)

    created = client.post(
        "/api/v1/jobs", {"image": image.pk, "command": "true", "team": team.pk}, format="json"
    )

    assert created.status_code == 201
    assert client.get(f"/api/v1/jobs/{created.json()['id']}").status_code == 200
    assert client.get("/api/v1/health").status_code == 200


def test_a_member_of_two_teams_must_name_the_team(member, other_team, image, api_client_for) -> None:
    Membership.objects.create(user=member, team=other_team, role="member")

    response = api_client_for(member).post(
        "/api/v1/jobs/", {"image": image.pk, "command": "true"}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["extra"]["fields"]["team"] == ["Name the team to submit to."]


def test_a_user_in_no_team_gets_a_field_message(image, api_client_for) -> None:
    loner = User.objects.create_user("loner")

    response = api_client_for(loner).post(
        "/api/v1/jobs/", {"image": image.pk, "command": "true"}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["extra"]["fields"]["team"] == ["You are not a member of any team."]

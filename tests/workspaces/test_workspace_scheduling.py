"""Workspaces go through the same scheduler and quota as batch jobs: on shares of a GPU beside batch
jobs, never past the team's quota; and a TensorBoard of a job reads that job's event folder."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from typing import Any

from django.utils import timezone

from jobs import scheduling
from jobs.binding import task_spec
from jobs.models import Job, Task
from jobs.services import job_submit
from jobs.states import JobStatus
from jobs.validation import check_submission
from quotas.models import Quota
from tests.jobs.runtime_fixtures import clock, image, researcher, sim, team  # noqa: F401  (fixtures)
from workspaces.culling import cull_idle_workspaces
from workspaces.models import WorkspaceActivity
from workspaces.services import tensorboard_start


def _submit(user: Any, image: Any, **fields: Any) -> Job:
    checked = check_submission(user=user, data={"image": image.reference, **fields})
    assert checked.ok, checked.errors
    return job_submit(user=user, spec=checked.spec, image=checked.image, team=checked.team)


def _notebook(user: Any, image: Any) -> Job:
    return _submit(user, image, kind="workspace", cpu_milli=100, memory_mib=256)


def test_workspaces_share_gpus_beside_batch_jobs_and_wait_past_the_quota(
    sim, researcher, team, image
) -> None:
    Quota.objects.filter(team=team).update(max_gpu_milli=1750)
    batch = _submit(
        researcher, image, command="python train.py", gpu_milli=500, cpu_milli=100, memory_mib=256
    )
    whole = _submit(researcher, image, command="python train.py", gpus=1, cpu_milli=100, memory_mib=256)
    scheduling.run_scheduling_cycle(backend=sim)
    notebooks = [_notebook(researcher, image) for _ in range(3)]

    scheduling.run_scheduling_cycle(backend=sim)

    states = {job.pk: job.status for job in Job.objects.all()}
    admitted = [n.pk for n in notebooks if states[n.pk] == JobStatus.ADMITTED.value]
    assert states[batch.pk] == states[whole.pk] == JobStatus.ADMITTED.value
    assert len(admitted) == 1  # 500 + 1000 + 250 = the quota of 1750
    waiting = Job.objects.get(pk=next(n.pk for n in notebooks if n.pk not in admitted))
    assert waiting.status == JobStatus.QUEUED.value and "quota" in waiting.pending_reason.lower()
    per_gpu: dict[tuple[str, int], int] = defaultdict(int)
    for task in Task.objects.filter(job__status=JobStatus.ADMITTED.value):
        for index in task.gpu_indices:
            per_gpu[(task.node, index)] += task.gpu_milli or 1000
    assert all(total <= 1000 for total in per_gpu.values()), per_gpu
    notebook_task = Task.objects.get(job_id=admitted[0])
    batch_task = Task.objects.get(job=batch)
    assert notebook_task.gpu_milli == 250
    # Shares of one GPU: the notebook sits beside the half-GPU batch job, not on a GPU of its own.
    assert (notebook_task.node, notebook_task.gpu_indices) == (batch_task.node, batch_task.gpu_indices)


def test_a_workspace_task_gets_the_platforms_address_and_token_but_a_batch_job_does_not(
    researcher, image
) -> None:
    notebook = _notebook(researcher, image)
    batch = _submit(researcher, image, command="python train.py")
    Task.objects.create(job=notebook, index=0, name=f"job-{notebook.pk}-0")
    Task.objects.create(job=batch, index=0, name=f"job-{batch.pk}-0")

    env = task_spec(notebook, notebook.tasks.get()).env
    assert env["GPU_PLATFORM_WORKSPACE_BASE_URL"] == f"/workspaces/{notebook.pk}/"
    assert env["GPU_PLATFORM_WORKSPACE_PORT"] == "8888" and len(env["JUPYTER_TOKEN"]) >= 32
    assert not any(k.startswith("GPU_PLATFORM_WORKSPACE") for k in task_spec(batch, batch.tasks.get()).env)
    assert "JUPYTER_TOKEN" not in notebook.env  # never stored with the job, so never shown


def test_a_tensorboard_of_a_job_is_a_cpu_workspace_reading_that_jobs_events_and_is_started_once(
    researcher, image
) -> None:
    batch = _submit(researcher, image, command="python train.py", gpus=1)

    board = tensorboard_start(job=batch, user=researcher)

    assert (board.kind, board.workspace_app, board.tensorboard_of_id) == (
        "workspace",
        "tensorboard",
        batch.pk,
    )
    assert (board.gpus, board.gpu_milli, board.preemptible) == (0, 0, False)
    assert tensorboard_start(job=batch, user=researcher).pk == board.pk
    Task.objects.create(job=board, index=0, name=f"job-{board.pk}-0")
    assert task_spec(board, board.tasks.get()).env["GPU_PLATFORM_WORKSPACE_LOGS_OF"] == str(batch.pk)


def test_a_request_through_the_proxy_postpones_culling(researcher, image, settings) -> None:
    settings.WORKSPACE_IDLE_SECONDS = 600
    app = _submit(researcher, image, kind="workspace", workspace_app="http", command="python -m http.server")
    started = timezone.now() - timedelta(hours=2)
    Job.objects.filter(pk=app.pk).update(
        status=JobStatus.RUNNING.value, started_at=started, run_started_at=started
    )
    WorkspaceActivity.objects.create(job=app, last_request_at=timezone.now() - timedelta(seconds=60))

    assert cull_idle_workspaces() == []

    WorkspaceActivity.objects.filter(job=app).update(last_request_at=timezone.now() - timedelta(seconds=700))
    assert [c.job_id for c in cull_idle_workspaces()] == [app.pk]
    app.refresh_from_db()
    assert app.status == JobStatus.STOPPING.value
    assert app.events.last().reason.startswith("culled: idle for 12 min")


def test_a_workspace_whose_owner_may_no_longer_cancel_it_is_still_culled(
    researcher, team, image, settings
) -> None:
    from accounts.models import Membership, Role

    settings.WORKSPACE_IDLE_SECONDS = 60
    app = _submit(researcher, image, kind="workspace", workspace_app="http", command="python -m http.server")
    started = timezone.now() - timedelta(hours=2)
    Job.objects.filter(pk=app.pk).update(
        status=JobStatus.RUNNING.value, started_at=started, run_started_at=started
    )
    Membership.objects.filter(user=researcher, team=team).update(role=Role.VIEWER)

    assert [c.job_id for c in cull_idle_workspaces()] == [app.pk]
    app.refresh_from_db()
    assert app.status == JobStatus.STOPPING.value and app.events.last().actor == "system"

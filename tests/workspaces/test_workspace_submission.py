"""kind: workspace through the REST API: its defaults, its rules, and the team's workspace limits."""

from __future__ import annotations

from typing import Any

import pytest

from workspaces.models import WorkspaceLimit

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"


def _workspace(image: Any, **fields: Any) -> dict[str, Any]:
    return {"kind": "workspace", "image": image.reference, "team": "vision", **fields}


def test_a_workspace_defaults_to_a_quarter_gpu_jupyterlab_that_is_not_preemptible(
    api_client_for, member, image
) -> None:
    response = api_client_for(member).post(JOBS, _workspace(image), format="json")

    assert response.status_code == 201, response.json()
    job = response.json()
    assert (job["kind"], job["workspace_app"], job["workspace_port"]) == ("workspace", "jupyterlab", 8888)
    assert (job["gpus"], job["gpu_milli"], job["gpu_memory_mib"]) == (0, 250, 4096)
    assert job["preemptible"] is False
    assert job["command"][:2] == ["jupyter", "lab"]
    assert "--ServerApp.base_url=$(GPU_PLATFORM_WORKSPACE_BASE_URL)" in job["command"]


def test_the_jobs_own_token_is_in_no_answer_of_the_api(api_client_for, member, image) -> None:
    from workspaces.access import workspace_token

    client = api_client_for(member)
    job = client.post(JOBS, _workspace(image), format="json").json()

    answer = client.get(f"{JOBS}{job['id']}/").content.decode()
    assert workspace_token(job["id"]) not in answer


def test_a_workspace_keeps_what_its_owner_asked_for(api_client_for, member, image) -> None:
    fields = _workspace(
        image, workspace_app="http", workspace_port=9000, command=["python", "-m", "http.server"],
        gpu_milli=500, preemptible=True,
    )  # fmt: skip
    job = api_client_for(member).post(JOBS, fields, format="json").json()

    assert (job["workspace_port"], job["gpu_milli"], job["preemptible"]) == (9000, 500, True)


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        (
            {"kind": "batch", "workspace_port": 8888, "command": "python train.py"},
            "workspace_port",
            "Only a workspace",
        ),
        ({"kind": "workspace", "replicas": 2}, "replicas", "exactly one replica"),
        ({"kind": "workspace", "workspace_port": 80}, "workspace_port", "between 1024 and 65535"),
        ({"kind": "workspace", "workspace_app": "http"}, "command", "This field is required"),
        ({"kind": "notebook"}, "kind", "not a valid choice"),
    ],
)
def test_it_rejects_a_malformed_workspace_with_the_fields_message(
    api_client_for, member, image, fields, field, words
) -> None:
    response = api_client_for(member).post(JOBS, {"image": image.reference, **fields}, format="json")

    assert response.status_code == 400
    body = response.json()
    assert words in " ".join(body["extra"]["fields"][field]), body


def test_a_team_at_its_workspace_limit_gets_a_400_naming_it(api_client_for, member, team, image) -> None:
    WorkspaceLimit.objects.create(team=team, max_workspaces=1)
    client = api_client_for(member)
    assert client.post(JOBS, _workspace(image), format="json").status_code == 201

    response = client.post(JOBS, _workspace(image), format="json")

    assert response.status_code == 400
    assert "1 workspace(s) at once" in response.json()["extra"]["fields"]["kind"][0]


def test_a_teams_workspace_gpu_share_limit_counts_every_open_workspace(
    api_client_for, member, team, image
) -> None:
    WorkspaceLimit.objects.create(team=team, max_gpu_milli=400)
    client = api_client_for(member)
    assert client.post(JOBS, _workspace(image), format="json").status_code == 201

    response = client.post(JOBS, _workspace(image), format="json")

    assert response.status_code == 400
    assert "250 are held, this one asks for 250" in response.json()["extra"]["fields"]["gpu_milli"][0]
    # Batch jobs are not workspaces: the limit leaves them alone.
    batch = {"image": image.reference, "team": "vision", "command": "python train.py", "gpu_milli": 500}
    assert client.post(JOBS, batch, format="json").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_gpuctl_submits_a_workspace_without_a_spec_file_and_says_where_to_open_it(
    live_server, member, image
) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    from accounts.services import token_create

    token = token_create(user=member, name="cli")[1]
    client_src = Path(__file__).resolve().parents[2] / "client"
    env = {**os.environ, "GPUCTL_URL": live_server.url, "GPUCTL_TOKEN": token, "PYTHONPATH": str(client_src)}
    run = [
        sys.executable,
        "-m",
        "gpuctl",
        "submit",
        "--kind",
        "workspace",
        "--set",
        f"image={image.reference}",
    ]

    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode == 0, done.stderr
    job_id = int(done.stdout.split()[1])
    assert f"{live_server.url}/workspaces/{job_id}/" in done.stdout
    without = subprocess.run(run[:4], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert without.returncode == 2 and "-f" in without.stderr


def test_the_job_page_offers_open_only_for_a_running_workspace_and_tensorboard_for_a_batch_job(
    client, member, image, api_client_for
) -> None:
    from jobs.models import Job

    api = api_client_for(member)
    workspace = api.post(JOBS, _workspace(image), format="json").json()["id"]
    batch = api.post(
        JOBS, {"image": image.reference, "team": "vision", "command": "python t.py"}, format="json"
    )
    client.force_login(member)

    queued = client.get(f"/jobs/{workspace}/").content.decode()
    assert 'id="open-workspace"' not in queued and 'id="open-later"' in queued
    Job.objects.filter(pk=workspace).update(status="RUNNING")
    running = client.get(f"/jobs/{workspace}/").content.decode()
    assert f'href="/workspaces/{workspace}/lab"' in running and 'id="tensorboard-button"' not in running
    assert 'id="tensorboard-button"' in client.get(f"/jobs/{batch.json()['id']}/").content.decode()


def test_the_workspace_form_starts_a_workspace_and_shows_field_errors(client, member, image) -> None:
    client.force_login(member)
    bad = client.post("/workspaces/new/", {"team": "vision", "image": image.reference, "gpu_milli": "5000"})
    assert bad.status_code == 400 and "gpu_milli" in bad.content.decode()

    good = client.post("/workspaces/new/", {"team": "vision", "image": image.reference, "gpu_milli": "250"})

    assert good.status_code == 302
    from jobs.models import Job

    job = Job.objects.get(pk=int(good["Location"].rstrip("/").split("/")[-1]))
    assert (job.kind, job.gpu_milli, job.workspace_app) == ("workspace", 250, "jupyterlab")

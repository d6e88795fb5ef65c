"""A workspace with a real JupyterLab (a test dependency) on the local backend, opened through the
platform's proxy over real sockets: HTTP, a kernel's WebSocket, the access rules, idle culling and
the files that outlive a culled workspace."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets.sync.client as ws_client
from django.contrib.sessions.backends.db import SessionStore
from django.utils import timezone
from websockets.exceptions import InvalidStatus

from accounts.models import Membership, Role
from jobs import scheduling, selectors, sync
from jobs.binding import job_bind
from jobs.models import Job
from jobs.services import job_clone, job_submit
from jobs.states import JobStatus
from jobs.validation import check_submission
from tests.jobs.runtime_fixtures import image, local_backend, make_member, make_team, researcher, team  # noqa: F401
from tests.workspaces.live_server import serving_platform
from workspaces.access import workspace_token
from workspaces.culling import cull_idle_workspaces
from workspaces.spec import DEFAULT_COMMANDS

pytest.importorskip("jupyterlab", reason="JupyterLab is a test dependency (requirements.lock)")
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

JUPYTER = str(Path(sys.executable).parent / "jupyter")


@pytest.fixture
def local(tmp_path: Path, settings: Any) -> Iterator[Any]:
    yield from local_backend(settings, tmp_path, virtual_gpus=1)


@pytest.fixture
def platform_url(local: Any) -> Iterator[str]:
    with serving_platform() as url:
        yield url


def _session_cookie(user: Any) -> dict[str, str]:
    """A signed-in browser's cookie, made the way django.contrib.auth.login makes it."""
    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.create()
    return {"sessionid": session.session_key}


def _start_workspace(user: Any, image: Any, backend: Any) -> Job:
    # The default JupyterLab command, from this test environment's jupyter.
    # (The tests run as root without a job user: JupyterLab refuses root unless told.)
    command = [JUPYTER, *DEFAULT_COMMANDS["jupyterlab"][1:], "--allow-root"]
    checked = check_submission(
        user=user, data={"kind": "workspace", "image": image.reference, "command": command, "cpu_milli": 100}
    )
    assert checked.ok, checked.errors
    job = job_submit(user=user, spec=checked.spec, image=checked.image, team=checked.team)
    return _run(job, backend)


def _run(job: Job, backend: Any) -> Job:
    scheduling.run_scheduling_cycle(backend=backend)
    assert job_bind(job_id=job.pk, backend=backend) == "bound"
    deadline = time.monotonic() + 30
    while job.status != JobStatus.RUNNING.value:
        assert time.monotonic() < deadline, f"workspace stayed {job.status}"
        sync.sync_status(backend=backend)
        job.refresh_from_db()
        time.sleep(0.1)
    return job


def _wait_served(client: httpx.Client, url: str) -> httpx.Response:
    """JupyterLab takes a few seconds to listen after its process starts (the proxy says 502 then)."""
    deadline = time.monotonic() + 90
    while True:
        response = client.get(url)
        if response.status_code != 502:
            if response.status_code == 503:  # the server ended: say why
                job_id = int(url.split("/workspaces/")[1].split("/")[0])
                pytest.fail(f"the workspace ended: {selectors.job_logs(job=Job.objects.get(pk=job_id))}")
            return response
        assert time.monotonic() < deadline, "JupyterLab never answered through the proxy"
        time.sleep(0.25)


def _execute(url: str, cookies: dict[str, str], kernel_id: str, code: str) -> str:
    """Run ``code`` in the kernel over its WebSocket (Jupyter's JSON protocol); its printed output."""
    session = uuid.uuid4().hex
    msg_id = uuid.uuid4().hex
    message = {
        "header": {"msg_id": msg_id, "username": "test", "session": session, "msg_type": "execute_request",
                   "version": "5.3", "date": timezone.now().isoformat()},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True},
    }  # fmt: skip
    ws_url = url.replace("http://", "ws://") + f"api/kernels/{kernel_id}/channels?session_id={session}"
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    printed = []
    with ws_client.connect(ws_url, additional_headers={"Cookie": cookie}, open_timeout=20) as socket:
        socket.send(json.dumps(message))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            reply = json.loads(socket.recv(timeout=60))
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if reply["msg_type"] == "stream":
                printed.append(reply["content"]["text"])
            if reply["msg_type"] == "status" and reply["content"]["execution_state"] == "idle":
                break
    return "".join(printed)


def test_a_jupyterlab_workspace_is_opened_through_the_proxy_by_http_and_websocket(
    local, platform_url, researcher, team, image
) -> None:
    job = _start_workspace(researcher, image, local)
    base = f"{platform_url}/workspaces/{job.pk}/"
    cookies = _session_cookie(researcher)
    with httpx.Client(cookies=cookies, timeout=30) as client:
        page = _wait_served(client, base + "lab")

        assert page.status_code == 200
        assert "<title>JupyterLab</title>" in page.text
        assert workspace_token(job.pk) not in page.text  # the token never reaches the browser
        kernel = client.post(base + "api/kernels", json={"name": "python3"})
        assert kernel.status_code == 201, kernel.text

    assert _execute(base, cookies, kernel.json()["id"], "print(6 * 7)") == "42\n"


def test_an_outsider_or_a_viewer_gets_404_and_an_anonymous_caller_is_sent_to_sign_in(
    local, platform_url, researcher, team, image
) -> None:
    job = _start_workspace(researcher, image, local)
    base = f"{platform_url}/workspaces/{job.pk}/"
    outsider = make_member("eve", make_team("speech"))
    viewer = make_member("vic", team)
    Membership.objects.filter(user=viewer).update(role=Role.VIEWER)
    with httpx.Client(timeout=30, cookies=_session_cookie(researcher)) as client:
        _wait_served(client, base + "api/status")

    for user in (outsider, viewer):
        assert httpx.get(base + "lab", cookies=_session_cookie(user)).status_code == 404
    with pytest.raises(InvalidStatus):
        ws_client.connect(
            base.replace("http://", "ws://") + "api/events/subscribe",
            additional_headers={"Cookie": f"sessionid={_session_cookie(outsider)['sessionid']}"},
        )
    anonymous = httpx.get(base + "lab")
    assert anonymous.status_code == 302 and anonymous.headers["location"].startswith("/login/?next=")
    # A batch job's id is no workspace, whoever asks.
    assert (
        httpx.get(f"{platform_url}/workspaces/999999/", cookies=_session_cookie(researcher)).status_code
        == 404
    )


def test_an_idle_workspace_is_culled_with_the_reason_and_its_files_survive_a_restart(
    local, platform_url, researcher, team, image, settings
) -> None:
    settings.WORKSPACE_IDLE_SECONDS = 600
    job = _start_workspace(researcher, image, local)
    base = f"{platform_url}/workspaces/{job.pk}/"
    cookies = _session_cookie(researcher)
    with httpx.Client(cookies=cookies, timeout=30) as client:
        _wait_served(client, base + "api/status")
        saved = client.put(
            base + "api/contents/notes.txt", json={"type": "file", "format": "text", "content": "kept"}
        )
        assert saved.status_code in (200, 201), saved.text

    assert cull_idle_workspaces() == []  # just used: not idle
    later = timezone.now() + timedelta(seconds=601)
    [culled] = cull_idle_workspaces(now=later)

    assert culled.job_id == job.pk
    assert sync.job_stop(job_id=job.pk, backend=local)
    job.refresh_from_db()
    assert job.status == JobStatus.STOPPED.value
    reasons = list(job.events.values_list("reason", flat=True))
    assert any(r.startswith("culled: idle for 10 min") for r in reasons), reasons

    again = _run(job_clone(job=job, user=researcher), local)
    with httpx.Client(cookies=cookies, timeout=30) as client:
        found = _wait_served(client, f"{platform_url}/workspaces/{again.pk}/api/contents/notes.txt")
    assert found.status_code == 200 and found.json()["content"] == "kept"

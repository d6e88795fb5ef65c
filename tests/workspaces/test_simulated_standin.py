"""On the simulated backend a running workspace is served by a stand-in page, through the same proxy
and access rules, so the portal's Open flow works without Jupyter."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from jobs import binding, scheduling, sync
from jobs.services import job_submit
from jobs.states import JobStatus
from jobs.validation import check_submission
from tests.jobs.runtime_fixtures import clock, image, make_member, make_team, researcher, sim, team  # noqa: F401
from tests.workspaces.live_server import serving_platform
from tests.workspaces.test_jupyterlab_workspace import _session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def platform_url(sim: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr("jobs.cluster.get_backend", lambda name=None: sim)
    with serving_platform() as url:
        yield url


def test_a_running_simulated_workspace_opens_the_stand_in_page_with_the_token_added(
    sim, clock, platform_url, researcher, image
) -> None:
    checked = check_submission(user=researcher, data={"kind": "workspace", "image": image.reference})
    job = job_submit(user=researcher, spec=checked.spec, image=checked.image, team=checked.team)
    scheduling.run_scheduling_cycle(backend=sim)
    assert binding.job_bind(job_id=job.pk, backend=sim) == "bound"
    url = f"{platform_url}/workspaces/{job.pk}/lab"
    assert httpx.get(url, cookies=_session_cookie(researcher)).status_code == 503  # starting: not yet

    clock.advance(60)
    sync.sync_status(backend=sim)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING.value
    page = httpx.get(url, cookies=_session_cookie(researcher))

    assert page.status_code == 200
    assert f"Simulated workspace {job.pk}" in page.text and "token received" in page.text
    outsider = make_member("eve", make_team("speech"))
    assert httpx.get(url, cookies=_session_cookie(outsider)).status_code == 404

"""The Nodes page (/nodes/): every node of the simulated demo cluster with its GPU models, driver,
allocation and health, the same numbers as GET /api/v1/cluster/, in Chromium at laptop and phone
width; an unreachable backend is a message on the page, not an error page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from jobs.services import job_submit
from jobs.specs import JobSpec
from tests.frontend import portal_browser
from tests.frontend.portal_browser import (
    Console,
    Sim,
    browser_test,
    check_phone_width,
    log_in,
    new_page,
    run_cluster,
    shot,
    sync_api,
)

browser = portal_browser.browser  # the module's Chromium (a fixture)
sim = portal_browser.sim


def _cordon(sim: Sim, node: str) -> None:
    """Mark ``node`` unschedulable in the simulated cluster's state file (as a drain would)."""
    sim.backend.snapshot()  # the state file exists from the first read on
    path = Path(sim.backend.state_path)
    state = json.loads(path.read_text())
    for spec in state["nodes"]:
        if spec["name"] == node:
            spec["schedulable"] = False
    path.write_text(json.dumps(state))


@pytest.mark.django_db
def test_the_nodes_page_says_when_the_cluster_cannot_be_reached(
    member: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scheduler.backends.base import BackendError

    def unreachable(name: str | None = None) -> Any:
        raise BackendError("connection refused")

    monkeypatch.setattr("jobs.cluster.get_backend", unreachable)
    client = Client()
    client.force_login(member)
    response = client.get("/nodes/")
    assert response.status_code == 200
    assert b"The cluster cannot be reached right now: connection refused" in response.content


@browser_test
@pytest.mark.django_db(transaction=True)
def test_an_operator_reads_nodes_gpus_drivers_allocation_and_health(
    browser: Any, live_server: Any, sim: Sim, member: Any, team: Any, image: Any
) -> None:
    expect = sync_api().expect
    job = job_submit(
        user=member,
        spec=JobSpec(name="ddp", command=["python", "ddp.py"], gpus=2, sim_duration_seconds=5000),
        image=image,
        team=team,
    )
    run_cluster(sim, seconds=13)
    job.refresh_from_db()
    assert job.status == "RUNNING"
    task = job.tasks.get()
    cordoned = next(n.name for n in sim.backend.snapshot().nodes if n.name != task.node)
    _cordon(sim, cordoned)

    base = live_server.url
    console = Console()
    page = new_page(browser, console)
    log_in(page, base, "max", then="/jobs/")
    page.get_by_role("link", name="Nodes").click()
    page.wait_for_url(f"{base}/nodes/")
    cluster = page.request.get(f"{base}/api/v1/cluster/").json()
    rows = page.locator("#nodes-table tbody tr[data-node]")
    expect(rows).to_have_count(len(cluster["nodes"]))
    for node in cluster["nodes"]:
        row = page.locator(f'#nodes-table tr[data-node="{node["name"]}"]')
        used = sum(g["used_milli"] for g in node["gpus"])
        expect(row).to_have_attribute("data-allocated-milli", str(used))
        expect(row.locator(".node-models")).to_have_text(f"{len(node['gpus'])} × {node['gpu_model']}")
        if node["driver_version"]:
            expect(row).to_contain_text(node["driver_version"])
        healthy = "false" if node["name"] == cordoned else "true"
        expect(row).to_have_attribute("data-healthy", healthy)
    expect(page.locator(f'#nodes-table tr[data-node="{task.node}"]')).to_contain_text("2 of 8 (25%)")
    expect(page.locator(f'#nodes-table tr[data-node="{cordoned}"]')).to_contain_text("Not ready")
    expect(page.locator("#stat-gpus")).to_have_text(str(cluster["totals"]["gpus"]))
    expect(page.locator("#stat-ready")).to_have_text(str(len(cluster["nodes"]) - 1))
    expect(page.locator("#stat-allocated")).to_have_text("2")
    # Per-GPU detail: the job's GPUs are allocated to its team.
    details = page.locator(f'details.node-gpus[data-node="{task.node}"]')
    details.locator("summary").click()
    for index in task.gpu_indices:
        expect(details.locator(f'tr[data-gpu="{index}"]')).to_contain_text("1000 milli-GPU")
        expect(details.locator(f'tr[data-gpu="{index}"]')).to_contain_text("vision")
    shot(page, "nodes.png")
    check_phone_width(browser, console, base, "max", ["/nodes/"])
    assert console.errors == []

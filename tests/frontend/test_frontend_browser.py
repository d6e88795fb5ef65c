"""The portal end to end in real headless Chromium (Debian's package) driven by Playwright, against
pytest-django's live server.

A researcher logs in, submits a fractional-GPU job through the form (after one field error from the
API), sees it on the GPU map where the scheduler put it, watches it reach SUCCEEDED without reloading,
cancels another job; a user of another team sees neither. Jobs run on a simulated cluster with an
injected clock: the test calls the runtime's services (jobs.scheduling, jobs.binding, jobs.sync) in
this process instead of a Celery worker, and the web pages read the same backend.

Screenshots go to docs/screenshots/ (or $PORTAL_SCREENSHOT_DIR). Every page is checked for browser
console errors; the only expected one is the 400 of the deliberately invalid submission.
"""

# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.frontend.portal_browser import (  # noqa: F401  (browser and sim are fixtures)
    BROWSER_MARKS,
    LAPTOP,
    PHONE,
    Console,
    Sim,
    browser,
    log_in,
    new_page,
    no_horizontal_overflow,
    run_cluster,
    shot,
    sim,
    unlabelled_controls,
)

pytestmark = BROWSER_MARKS

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def test_a_researcher_submits_a_fractional_job_and_follows_it_to_success(
    browser: Any,
    live_server: Any,
    sim: Sim,
    owner: Any,
    member: Any,
    viewer: Any,
    outsider: Any,
    team: Any,
    other_team: Any,
    image: Any,
) -> None:
    from images.services import catalog_sync
    from jobs.models import Job, Task
    from jobs.services import job_submit
    from jobs.specs import JobSpec

    # The standard images too, so the catalog and the image list look as they do after `make run`.
    catalog_sync()
    base = live_server.url
    console = Console()
    page = new_page(browser, console)
    log_in(page, base, "max")

    # Keyboard users can skip the navigation.
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent.trim()") == "Skip to content"

    # --- Submit form: the API's field error appears next to the field. ---
    page.goto(f"{base}/jobs/new/")
    assert unlabelled_controls(page) == []
    page.get_by_label("Name").fill("resnet-quarter")
    page.get_by_label("Image").select_option(str(image.pk))
    page.get_by_label("Command").fill("python train.py --epochs 3")
    page.get_by_label("Environment variables").fill("LR=0.1\nCUDA_VISIBLE_DEVICES=3")
    page.get_by_role("button", name="Submit job").click()
    env_error = page.locator("#err-env")
    sync_api.expect(env_error).to_contain_text("CUDA_VISIBLE_DEVICES is set by the platform")
    sync_api.expect(page.locator("#f-env")).to_have_attribute("aria-invalid", "true")
    sync_api.expect(page.locator("#form-message")).to_be_visible()
    assert Job.objects.count() == 0
    shot(page, "submit-form-error.png")
    # The one console error so far is the browser's note about that deliberate 400.
    assert len(console.errors) == 1 and "400" in console.errors[0], console.errors
    console.errors.clear()

    # --- The YAML view shows the form's spec, and an edited YAML imports back into the form. ---
    page.get_by_role("tab", name="YAML").click()
    yaml_box = page.get_by_label("Job spec as YAML")
    sync_api.expect(yaml_box).to_have_value(re.compile(r"name: resnet-quarter\n.*gpu_milli: 250", re.S))
    yaml_box.fill(yaml_box.input_value().replace("gpu_milli: 250", "gpu_milli: 300"))
    page.get_by_role("button", name="Import into the form").click()
    sync_api.expect(page.locator("#panel-form")).to_be_visible()
    sync_api.expect(page.locator("#f-gpu-milli")).to_have_value("300")
    # The import checks what it imported: the reserved variable is still there, and says so.
    sync_api.expect(page.locator("#err-env")).to_contain_text("CUDA_VISIBLE_DEVICES is set by the platform")
    assert len(console.errors) == 1 and "400" in console.errors[0], console.errors
    console.errors.clear()

    # --- Fix the field and ask for a quarter of a GPU with the slider. ---
    page.get_by_label("Environment variables").fill("LR=0.1")
    page.locator("#f-gpu-milli-range").fill("250")
    sync_api.expect(page.locator("#f-gpu-milli")).to_have_value("250")
    sync_api.expect(page.locator("#gpu-share-text")).to_contain_text("25% of one GPU")
    page.get_by_label("GPU memory (MiB)").fill("4096")
    page.locator("summary", has_text="More options").click()
    page.get_by_label("Simulated duration (seconds)").fill("600")
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    job = Job.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    assert (job.gpus, job.gpu_milli, job.gpu_memory_mib, job.env, job.team_id) == (
        0,
        250,
        4096,
        {"LR": "0.1"},
        team.pk,
    )
    assert job.command == ["python", "train.py", "--epochs", "3"]
    sync_api.expect(page.locator("#job-status")).to_have_text("QUEUED")

    # Another job of this researcher on two whole GPUs, one that waits for its team's quota, and jobs of
    # another team.
    pair = job_submit(
        user=member,
        spec=JobSpec(name="bert-2gpu", command=["python", "bert.py"], gpus=2, sim_duration_seconds=5000),
        image=image,
        team=team,
    )
    waiting = job_submit(
        user=member,
        # Six more GPUs than the team's maximum of 8 leaves free once the others run: it waits.
        spec=JobSpec(name="needs-six", command=["python", "big.py"], gpus=6),
        image=image,
        team=team,
    )
    for spec in (
        JobSpec(name="speech-ddp", command=["python", "ddp.py"], gpus=2, sim_duration_seconds=5000),
        JobSpec(
            name="speech-small",
            command=["python", "asr.py"],
            gpu_milli=500,
            gpu_memory_mib=8192,
            sim_duration_seconds=5000,
        ),
    ):
        job_submit(user=outsider, spec=spec, image=image, team=other_team)
    run_cluster(sim, seconds=13)  # past the simulated 2 s pending + 10 s image pull
    job.refresh_from_db()
    assert job.status == "RUNNING"
    task = Task.objects.get(job=job)

    # --- The GPU map shows the job where the scheduler put it, and matches the API's cluster view. ---
    page.goto(f"{base}/")
    segment = page.locator(f'.seg[data-job-id="{job.pk}"]')
    sync_api.expect(segment).to_have_count(1)
    tile = page.locator(f'li.gpu:has(.seg[data-job-id="{job.pk}"])')
    assert tile.get_attribute("data-node") == task.node
    assert int(tile.get_attribute("data-gpu")) == task.gpu_indices[0]
    assert segment.get_attribute("data-milli") == "250"
    cluster = page.request.get(f"{base}/api/v1/cluster/").json()
    api_used = {(n["name"], g["index"]): g["used_milli"] for n in cluster["nodes"] for g in n["gpus"]}
    shown = page.eval_on_selector_all(
        "li.gpu", "els => els.map(e => [e.dataset.node, Number(e.dataset.gpu), Number(e.dataset.usedMilli)])"
    )
    assert {(n, g): used for n, g, used in shown} == api_used
    assert sum(api_used.values()) == 250 + 2000 + 2000 + 500
    # Other teams' jobs are coloured by team, their ids hidden.
    assert page.locator('.seg[data-team="speech"][data-job-id=""]').count() == 3
    sync_api.expect(page.locator("#stat-allocated")).to_have_text("4.75 / 40")
    sync_api.expect(page.locator("#stat-running")).to_have_text("4")
    sync_api.expect(page.locator("#stat-waiting")).to_have_text("1")
    queue_row = page.locator(f'#queue-table tr[data-job-id="{waiting.pk}"]')
    sync_api.expect(queue_row).to_contain_text("#1")
    sync_api.expect(queue_row).to_contain_text("quota")
    sync_api.expect(page.locator(".topo-note").first).to_contain_text("NVLink groups: A {0–3}, B {4–7}")
    # The chart draws the platform's persisted history (none sampled in this test: an empty range).
    sync_api.expect(page.locator("#history-chart")).to_have_attribute("data-points", "0")
    sync_api.expect(page.locator("#history-chart canvas")).to_have_count(1)
    shot(page, "dashboard.png")

    # --- A user of another team sees neither job. ---
    other = new_page(browser, console)
    log_in(other, base, "oscar")
    for job_id in (job.pk, waiting.pk):
        assert other.request.get(f"{base}/jobs/{job_id}/").status == 404
        assert other.request.get(f"{base}/api/v1/jobs/{job_id}/").status == 404
    other.goto(f"{base}/jobs/")
    sync_api.expect(other.locator("#jobs-table tbody tr[data-job-id]")).to_have_count(2)  # speech's own
    for job_id in (job.pk, pair.pk, waiting.pk):
        assert other.locator(f'#jobs-table tr[data-job-id="{job_id}"]').count() == 0
    assert other.locator(f'#jobs-table tr[data-job-id="{waiting.pk}"]').count() == 0
    other.goto(f"{base}/")
    sync_api.expect(other.locator('.seg[data-team="vision"]')).to_have_count(3)
    assert other.locator(f'.seg[data-job-id="{job.pk}"]').count() == 0
    assert other.locator(f'#queue-table tr[data-job-id="{waiting.pk}"]').count() == 0
    other.context.close()

    # --- Cancel the job that waits. ---
    page.goto(f"{base}/jobs/{waiting.pk}/")
    sync_api.expect(page.locator("#job-queue")).to_contain_text("quota")
    page.get_by_role("button", name="Cancel job").click()
    page.get_by_role("button", name="Yes, cancel it").click()
    sync_api.expect(page.locator("#job-status")).to_have_text("STOPPED")
    waiting.refresh_from_db()
    assert waiting.status == "STOPPED"
    sync_api.expect(page.locator('#job-timeline li[data-to="STOPPED"]')).to_contain_text("max")

    # --- The jobs list follows the running job to SUCCEEDED without a reload. ---
    page.goto(f"{base}/jobs/")
    row = page.locator(f'#jobs-table tr[data-job-id="{job.pk}"]')
    sync_api.expect(row).to_have_attribute("data-status", "RUNNING")
    sync_api.expect(page.locator(f'#jobs-table tr[data-job-id="{waiting.pk}"] .badge')).to_have_text(
        "STOPPED"
    )
    sim.clock.advance(600)
    from jobs import sync

    sync.sync_status(backend=sim.backend)
    job.refresh_from_db()
    assert job.status == "SUCCEEDED"
    sync_api.expect(row).to_have_attribute("data-status", "SUCCEEDED")
    sync_api.expect(row.locator(".badge")).to_have_text("SUCCEEDED")
    sync_api.expect(page.locator(f'#jobs-table tr[data-job-id="{pair.pk}"] .badge')).to_have_text("RUNNING")
    shot(page, "jobs-list.png")
    page.get_by_label("Status").select_option(label="Finished")
    sync_api.expect(page).to_have_url(re.compile(r"status=SUCCEEDED"))
    sync_api.expect(page.locator("#jobs-table tbody tr[data-job-id]")).to_have_count(2)

    # --- Job detail: timeline, placement with links, logs. ---
    page.goto(f"{base}/jobs/{job.pk}/")
    sync_api.expect(page.locator("#job-status")).to_have_text("SUCCEEDED")
    for state in ("QUEUED", "ADMITTED", "STARTING", "RUNNING", "SUCCEEDED"):
        sync_api.expect(page.locator(f'#job-timeline li[data-to="{state}"]')).to_have_count(1)
    placement = page.locator(f'#placement-table tr[data-task="{task.name}"]')
    sync_api.expect(placement).to_have_attribute("data-node", task.node)
    sync_api.expect(placement).to_contain_text("250 milli-GPU, 4096 MiB")
    sync_api.expect(page.locator("#job-logs")).to_contain_text("exited with code 0")
    sync_api.expect(page.locator("#job-logs")).to_contain_text("python train.py --epochs 3")
    shot(page, "job-detail.png")

    # The two-GPU job: the link between its GPUs is the one in the node's topology.
    pair_task = Task.objects.get(job=pair)
    a, b = pair_task.gpu_indices
    node = next(n for n in cluster["nodes"] if n["name"] == pair_task.node)
    page.goto(f"{base}/jobs/{pair.pk}/")
    expected = f"GPU{a}–GPU{b} {node['topology']['links'][a][b]}"
    sync_api.expect(page.locator(f'#placement-table tr[data-task="{pair_task.name}"]')).to_contain_text(
        expected
    )
    sync_api.expect(page.locator("#job-status")).to_have_text("RUNNING")

    # --- Team page and image catalog. ---
    page.goto(f"{base}/teams/")
    sync_api.expect(page.locator("h1")).to_have_text("Vision")
    for username in ("olivia", "max", "vera"):
        sync_api.expect(page.locator("#members-table")).to_contain_text(username)
    sync_api.expect(page.locator("#hours-chart canvas")).to_have_count(1)
    shot(page, "team.png")
    page.goto(f"{base}/images/")
    sync_api.expect(page.locator("#image-list")).to_contain_text("pytorch:2.4")
    sync_api.expect(page.locator("#image-list")).to_contain_text("12.4")
    shot(page, "images.png")

    # --- Phone width: every page fits without sideways scrolling. ---
    phone = new_page(browser, console, PHONE)
    log_in(phone, base, "max")
    for path in ("/", "/jobs/", "/jobs/new/", f"/jobs/{job.pk}/", "/teams/", "/images/"):
        phone.goto(f"{base}{path}")
        phone.wait_for_load_state("networkidle")
        assert no_horizontal_overflow(phone), path
    phone.goto(f"{base}/")
    sync_api.expect(phone.locator("li.gpu")).to_have_count(40)
    shot(phone, "phone-dashboard.png")
    phone.context.close()

    # --- Log out. ---
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{base}/login/")
    page.goto(f"{base}/jobs/")
    sync_api.expect(page).to_have_url(re.compile(r"/login/\?next="))

    assert console.errors == []


def test_clone_edit_a_copy_and_read_only_viewers(
    browser: Any, live_server: Any, sim: Sim, member: Any, viewer: Any, team: Any, image: Any
) -> None:
    from jobs.models import Job
    from jobs.services import job_submit
    from jobs.specs import JobSpec

    base = live_server.url
    console = Console()
    original = job_submit(
        user=member,
        spec=JobSpec(
            name="sweep",
            command=["python", "sweep.py", "--lr", "0.1"],
            gpu_milli=400,
            gpu_memory_mib=2048,
            env={"SEED": "7"},
        ),
        image=image,
        team=team,
    )
    page = new_page(browser, console)
    log_in(page, base, "max")

    # "Edit a copy" opens the form filled with the job's spec.
    page.goto(f"{base}/jobs/{original.pk}/")
    page.get_by_role("link", name="Edit a copy").click()
    page.wait_for_url(re.compile(r"/jobs/new/\?from="))
    sync_api.expect(page.get_by_label("Name")).to_have_value("sweep-copy")
    sync_api.expect(page.locator("#f-gpu-milli")).to_have_value("400")
    sync_api.expect(page.get_by_label("GPU memory (MiB)")).to_have_value("2048")
    sync_api.expect(page.get_by_label("Command")).to_have_value("python sweep.py --lr 0.1")
    sync_api.expect(page.get_by_label("Environment variables")).to_have_value("SEED=7")
    page.get_by_label("Priority").fill("5")
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    copy = Job.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    assert (copy.name, copy.gpu_milli, copy.gpu_memory_mib, copy.env, copy.priority, copy.command) == (
        "sweep-copy",
        400,
        2048,
        {"SEED": "7"},
        5,
        ["python", "sweep.py", "--lr", "0.1"],
    )

    # "Clone and submit" submits the same spec at once and shows the new job.
    page.goto(f"{base}/jobs/{original.pk}/")
    page.get_by_role("button", name="Clone and submit").click()
    page.wait_for_url(lambda url: re.search(r"/jobs/(\d+)/$", url) and not url.endswith(f"/{original.pk}/"))
    clone = Job.objects.order_by("-pk").first()
    assert clone is not None and clone.pk not in (original.pk, copy.pk)
    assert (clone.gpu_milli, clone.env, clone.team_id) == (400, {"SEED": "7"}, team.pk)
    sync_api.expect(page.locator("#job-timeline")).to_contain_text(f"clone of job {original.pk}")

    # The catalog's "Use this image" preselects the image in the form.
    page.goto(f"{base}/images/")
    page.get_by_role("link", name=f"Use this image ({image.reference})").click()
    sync_api.expect(page.get_by_label("Image")).to_have_value(str(image.pk))

    # A viewer reads but cannot cancel, clone or submit.
    reader = new_page(browser, console)
    log_in(reader, base, "vera")
    reader.goto(f"{base}/jobs/{original.pk}/")
    sync_api.expect(reader.locator("#job-status")).to_have_text("QUEUED")
    assert reader.get_by_role("button", name="Cancel job").count() == 0
    assert reader.get_by_role("button", name="Clone and submit").count() == 0
    reader.goto(f"{base}/jobs/new/")
    sync_api.expect(reader.get_by_role("button", name="Submit job")).to_be_disabled()
    sync_api.expect(reader.locator("#viewer-note")).to_contain_text("You are a viewer in Vision")
    assert reader.get_by_role("link", name="Submit").count() == 0
    reader.context.close()
    page.context.close()

    assert console.errors == []

"""The portal's server side, without a browser: access to pages, the small JSON endpoints it adds
(summary counts, YAML conversion, the chart library's files), and the GPU-hours-per-day arithmetic of the team page."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.test import Client

from frontend.selectors import UsageSpan, daily_gpu_hours
from frontend.templatetags.portal import gpus
from frontend.yaml_spec import YamlSpecError, dump_spec, parse_spec

PAGES = ["/", "/jobs/", "/jobs/new/", "/teams/", "/images/"]


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("path", PAGES)
def test_it_sends_anonymous_visitors_to_the_login_page(path: str) -> None:
    response = Client().get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


@pytest.mark.django_db
def test_it_logs_in_with_a_password_and_out_with_a_post(member: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    page = client.get("/login/")
    token = page.cookies["csrftoken"].value
    response = client.post(
        "/login/", {"username": "max", "password": "max-password-1", "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/jobs/").status_code == 200
    # Logging out is a POST with the CSRF token (a GET must not sign anyone out).
    assert client.get("/logout/").status_code == 405
    token = client.cookies["csrftoken"].value
    assert client.post("/logout/", {"csrfmiddlewaretoken": token}).status_code == 302
    assert client.get("/jobs/").status_code == 302


@pytest.mark.django_db
def test_it_refuses_a_wrong_password_with_a_message(member: Any) -> None:
    response = Client().post("/login/", {"username": "max", "password": "wrong"})
    assert response.status_code == 200
    assert b"didn&#x27;t match" in response.content or b"didn't match" in response.content


@pytest.mark.django_db
@pytest.mark.parametrize("path", PAGES)
def test_every_page_renders_for_a_member(member: Any, image: Any, path: str) -> None:
    response = _client(member).get(path, follow=True)
    assert response.status_code == 200
    assert b'name="csrf-token"' in response.content


@pytest.mark.django_db
def test_a_job_page_is_a_404_for_another_team(member: Any, outsider: Any, submit_job: Any) -> None:
    job = submit_job(member)
    assert _client(member).get(f"/jobs/{job.pk}/").status_code == 200
    assert _client(outsider).get(f"/jobs/{job.pk}/").status_code == 404


@pytest.mark.django_db
def test_the_cancel_button_shows_only_for_who_may_cancel(
    member: Any, owner: Any, viewer: Any, submit_job: Any
) -> None:
    job = submit_job(member)
    assert b'id="cancel-button"' in _client(member).get(f"/jobs/{job.pk}/").content
    assert b'id="cancel-button"' in _client(owner).get(f"/jobs/{job.pk}/").content
    viewer_page = _client(viewer).get(f"/jobs/{job.pk}/").content
    assert b'id="cancel-button"' not in viewer_page
    assert b'id="clone-button"' not in viewer_page


@pytest.mark.django_db
def test_the_team_page_shows_quota_and_members_only_to_members(
    member: Any, owner: Any, outsider: Any, team: Any
) -> None:
    response = _client(member).get(f"/teams/{team.pk}/")
    assert response.status_code == 200
    content = response.content.decode()
    assert "olivia" in content and "max" in content  # both members listed
    assert "0 of 8 GPUs" in content  # quota of the fixture team: 8000 milli-GPU
    assert "hours-data" in content
    assert _client(outsider).get(f"/teams/{team.pk}/").status_code == 404
    assert _client(member).get("/teams/").status_code == 302


@pytest.mark.django_db
def test_the_submit_form_offers_only_teams_the_user_may_submit_to(
    member: Any, viewer: Any, image: Any
) -> None:
    assert b'data-slug="vision"' in _client(member).get("/jobs/new/").content
    viewer_page = _client(viewer).get("/jobs/new/").content
    assert b'data-slug="vision"' not in viewer_page
    assert b"You are a viewer in Vision: viewers can look" in viewer_page


@pytest.mark.django_db
def test_the_image_catalog_shows_framework_and_cuda(member: Any, image: Any) -> None:
    content = _client(member).get("/images/").content.decode()
    assert "pytorch:2.4" in content and "12.4" in content


@pytest.mark.django_db
def test_the_summary_counts_every_team_but_names_no_job(member: Any, outsider: Any, submit_job: Any) -> None:
    submit_job(member)
    submit_job(member)
    response = _client(outsider).get("/portal/summary")
    assert response.status_code == 200
    body = response.json()
    assert (body["running"], body["waiting"], body["preemptions"], body["migrations"]) == (0, 2, 0, 0)
    assert set(body) == {"running", "waiting", "preempting", "preemptions", "migrations", "queue_order"}
    assert Client().get("/portal/summary").status_code == 401


@pytest.mark.django_db
def test_the_summary_counts_preemptions_and_migrations_of_all_teams(
    member: Any, outsider: Any, submit_job: Any
) -> None:
    from jobs.models import Job

    preempted = submit_job(member)
    Job.objects.filter(pk=preempted.pk).update(preemptions=3, migrations=1, status="PREEMPTING")
    body = _client(outsider).get("/portal/summary").json()
    assert (body["preemptions"], body["migrations"], body["preempting"], body["running"]) == (3, 1, 1, 1)


@pytest.mark.django_db
def test_the_job_page_has_the_preemption_history_and_attained_service(member: Any, submit_job: Any) -> None:
    job = submit_job(member)
    content = _client(member).get(f"/jobs/{job.pk}/").content.decode()
    for element in (
        "job-attained",
        "job-preemptions",
        "job-time-lost",
        "preemption-table",
        "job-preemptible",
    ):
        assert f'id="{element}"' in content
    assert "<script>" not in content  # the Content-Security-Policy allows no inline script


@pytest.mark.django_db
def test_yaml_parse_turns_text_into_the_api_mapping(member: Any) -> None:
    client = _client(member)
    text = "name: demo\ncommand: [python, train.py]\ngpu_milli: 250\nenv:\n  LR: '0.1'\n"
    response = client.post("/portal/yaml/parse", {"yaml": text}, content_type="application/json")
    assert response.status_code == 200
    assert response.json()["spec"] == {
        "name": "demo",
        "command": ["python", "train.py"],
        "gpu_milli": 250,
        "env": {"LR": "0.1"},
    }


@pytest.mark.django_db
@pytest.mark.parametrize("text", ["name: [unclosed", "- just\n- a list\n"])
def test_yaml_parse_answers_400_in_the_api_error_shape(member: Any, text: str) -> None:
    response = _client(member).post("/portal/yaml/parse", {"yaml": text}, content_type="application/json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_yaml"
    assert body["extra"]["fields"]["yaml"]


@pytest.mark.django_db
def test_yaml_endpoints_need_a_session_and_a_csrf_token(member: Any) -> None:
    anonymous = Client().post("/portal/yaml/dump", {"spec": {}}, content_type="application/json")
    assert anonymous.status_code == 401
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    assert client.post("/portal/yaml/dump", {"spec": {}}, content_type="application/json").status_code == 403


@pytest.mark.django_db
def test_yaml_dump_round_trips_through_parse(member: Any) -> None:
    spec = {"env": {"A": "1"}, "name": "x", "gpus": 2, "command": ["python", "t.py"], "args": []}
    client = _client(member)
    dumped = client.post("/portal/yaml/dump", {"spec": spec}, content_type="application/json").json()["yaml"]
    assert dumped.splitlines()[0] == "name: x"  # known fields in reading order, empty ones dropped
    assert "args" not in dumped
    parsed = client.post("/portal/yaml/parse", {"yaml": dumped}, content_type="application/json").json()
    assert parsed["spec"] == {"name": "x", "command": ["python", "t.py"], "gpus": 2, "env": {"A": "1"}}


def test_parse_spec_refuses_python_objects() -> None:
    with pytest.raises(YamlSpecError):
        parse_spec("!!python/object/apply:os.system ['true']")
    assert parse_spec("") == {}
    assert dump_spec({"name": "a", "gpu_milli": None}) == "name: a\n"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "kind", "marker"),
    [("uplot.min.js", "text/javascript", b"uPlot"), ("uplot.min.css", "text/css", b".uplot")],
)
def test_the_chart_library_is_served_from_its_python_package(name: str, kind: str, marker: bytes) -> None:
    response = Client().get(f"/vendor/{name}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith(kind)
    assert marker in b"".join(response.streaming_content)[:4000]


@pytest.mark.django_db
def test_an_unknown_vendor_file_is_a_404() -> None:
    assert Client().get("/vendor/plotly.min.js").status_code == 404


UTC = dt.UTC


def test_daily_gpu_hours_splits_a_finished_job_across_days_by_overlap() -> None:
    start = dt.datetime(2026, 11, 1, tzinfo=UTC)
    now = dt.datetime(2026, 11, 3, 12, tzinfo=UTC)
    # Ran 18:00 on the 1st to 06:00 on the 2nd (12 h) and recorded 6 GPU-hours: 3 on each day.
    span = UsageSpan(
        gpu_milli=500,
        start=dt.datetime(2026, 11, 1, 18, tzinfo=UTC),
        end=dt.datetime(2026, 11, 2, 6, tzinfo=UTC),
        gpu_hours=6.0,
    )
    days = daily_gpu_hours([span], window_start=start, now=now)
    assert [d.isoformat() for d, _ in days] == ["2026-11-01", "2026-11-02", "2026-11-03"]
    assert [h for _, h in days] == pytest.approx([3.0, 3.0, 0.0])


def test_daily_gpu_hours_counts_a_running_job_at_its_share_until_now() -> None:
    start = dt.datetime(2026, 11, 1, tzinfo=UTC)
    now = dt.datetime(2026, 11, 2, 12, tzinfo=UTC)
    # Started in October: only this month's part counts, 250 milli-GPU = a quarter GPU per hour.
    span = UsageSpan(gpu_milli=250, start=dt.datetime(2026, 10, 30, tzinfo=UTC), end=None, gpu_hours=None)
    days = daily_gpu_hours([span], window_start=start, now=now)
    assert [h for _, h in days] == pytest.approx([6.0, 3.0])


def test_gpus_filter_shows_milli_gpu_as_gpus() -> None:
    assert (gpus(250), gpus(2000), gpus(1500), gpus(0), gpus(None)) == ("0.25", "2", "1.5", "0", "0")


def test_login_page_labels_every_input() -> None:
    from pathlib import Path

    html = (Path(__file__).parents[2] / "frontend/templates/frontend/login.html").read_text()
    for field in ("id_username", "id_password"):
        assert f'for="{field}"' in html and f'id="{field}"' in html


def test_yaml_mapping_keys_become_strings() -> None:
    assert json.dumps(parse_spec("1: a\nname: b")) == '{"1": "a", "name": "b"}'


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("env: " + "[" * 5000 + "]" * 5000, "nests deeper than 32 levels"),
        ("a: &x [1, 2]\nb: *x\n", "aliases"),
    ],
)
def test_the_yaml_parse_endpoint_refuses_deep_nesting_and_aliases_with_a_400(
    member: Any, text: str, words: str
) -> None:
    response = _client(member).post("/portal/yaml/parse", {"yaml": text}, content_type="application/json")

    assert response.status_code == 400
    assert words in response.json()["message"]
    assert response.json()["code"] == "invalid_yaml"


@pytest.mark.django_db
def test_a_jobs_spec_exports_as_yaml_for_its_team_only(
    member: Any, outsider: Any, team: Any, image: Any
) -> None:
    import yaml

    from jobs.services import job_submit
    from jobs.specs import JobSpec

    job = job_submit(
        user=member, spec=JobSpec(name="e", command=["t"], gpu_milli=300), image=image, team=team
    )

    response = _client(member).get(f"/jobs/{job.pk}/spec.yaml")

    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="job-{job.pk}.yaml"'
    spec = yaml.safe_load(response.content)
    assert (spec["gpu_milli"], spec["team"], spec["image"], spec["command"]) == (
        300,
        "vision",
        "pytorch:2.4",
        ["t"],
    )
    assert _client(outsider).get(f"/jobs/{job.pk}/spec.yaml").status_code == 404


@pytest.mark.django_db
def test_the_favicon_is_served() -> None:
    response = Client().get("/favicon.ico")

    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"

"""Bad job submissions get HTTP 400 with a message per field, in the one error shape, and nothing stored
changes: no job, no event, no quota used."""

from __future__ import annotations

import json
from typing import Any

import pytest

from images.models import JobImage
from jobs.models import Job, JobEvent
from quotas.models import Quota, UsageEntry

pytestmark = pytest.mark.django_db

VALID = {"command": ["python", "train.py"], "gpu_milli": 250}

BAD_INPUT: list[tuple[str, dict[str, Any], str]] = [
    ("negative-gpus", {"gpus": -1, "gpu_milli": None}, "gpus"),
    ("fractional-gpus", {"gpus": 1.5, "gpu_milli": None}, "gpus"),
    ("string-gpus", {"gpus": "two", "gpu_milli": None}, "gpus"),
    ("boolean-gpus", {"gpus": True, "gpu_milli": None}, "gpus"),
    ("too-many-gpus", {"gpus": 10_000, "gpu_milli": None}, "gpus"),
    ("gpu-milli-zero", {"gpu_milli": 0}, "gpu_milli"),
    ("gpu-milli-negative", {"gpu_milli": -5}, "gpu_milli"),
    ("gpu-milli-1000", {"gpu_milli": 1000}, "gpu_milli"),
    ("gpu-milli-above", {"gpu_milli": 1500}, "gpu_milli"),
    ("gpu-milli-with-two-gpus", {"gpus": 2, "gpu_milli": 500}, "gpu_milli"),
    ("gpu-milli-with-one-gpu", {"gpus": 1, "gpu_milli": 500}, "gpu_milli"),
    ("gpu-memory-without-share", {"gpus": 1, "gpu_milli": None, "gpu_memory_mib": 1024}, "gpu_memory_mib"),
    ("unknown-image-name", {"image": "does-not-exist:1.0"}, "image"),
    ("unknown-image-id", {"image": 999_999}, "image"),
    ("missing-image", {"image": None}, "image"),
    ("missing-command", {"command": None}, "command"),
    ("empty-command", {"command": []}, "command"),
    ("blank-command", {"command": ["  "]}, "command"),
    ("command-not-strings", {"command": ["python", 3]}, "command"),
    ("unbalanced-quotes", {"command": "python 'train.py"}, "command"),
    ("oversized-name", {"name": "x" * 101}, "name"),
    ("oversized-argument", {"command": ["python", "a" * 5000]}, "command"),
    ("too-many-arguments", {"args": ["a"] * 300}, "args"),
    ("oversized-env-value", {"env": {"A": "v" * 5000}}, "env"),
    ("env-bad-name", {"env": {"1-BAD": "x"}}, "env"),
    ("env-reserved-name", {"env": {"NVIDIA_VISIBLE_DEVICES": "all"}}, "env"),
    ("env-ld-preload", {"env": {"LD_PRELOAD": "/tmp/hook.so"}}, "env"),
    ("env-ld-library-path", {"env": {"LD_LIBRARY_PATH": "/tmp"}}, "env"),
    ("env-python-startup", {"env": {"PYTHONSTARTUP": "/tmp/hook.py"}}, "env"),
    ("env-not-strings", {"env": {"A": {"nested": 1}}}, "env"),
    ("env-not-object", {"env": ["A=1"]}, "env"),
    ("zero-replicas", {"replicas": 0}, "replicas"),
    ("slowdown-below-one", {"slowdown_tolerance": 0.5}, "slowdown_tolerance"),
    ("negative-sim-duration", {"sim_duration_seconds": -1}, "sim_duration_seconds"),
    ("zero-max-runtime", {"max_runtime_seconds": 0}, "max_runtime_seconds"),
    ("allow-sharing-on-a-share", {"allow_sharing": True}, "allow_sharing"),
    ("allow-sharing-on-two-gpus", {"gpus": 2, "gpu_milli": None, "allow_sharing": True}, "allow_sharing"),
    ("allow-sharing-cpu-only", {"gpu_milli": None, "allow_sharing": True}, "allow_sharing"),
    ("allow-sharing-not-boolean", {"gpus": 1, "gpu_milli": None, "allow_sharing": "maybe"}, "allow_sharing"),
    ("preemptible-not-boolean", {"preemptible": "sometimes"}, "preemptible"),
    ("negative-min-runtime", {"min_runtime_seconds": -1}, "min_runtime_seconds"),
    ("fractional-min-runtime", {"min_runtime_seconds": 1.5}, "min_runtime_seconds"),
    ("huge-min-runtime", {"min_runtime_seconds": 10**9}, "min_runtime_seconds"),
    ("negative-grace", {"preemption_grace_seconds": -1}, "preemption_grace_seconds"),
    ("grace-above-an-hour", {"preemption_grace_seconds": 3601}, "preemption_grace_seconds"),
    ("unknown-field", {"gpu_mili": 250}, "gpu_mili"),
    ("unknown-team", {"team": "no-such-team"}, "team"),
]


@pytest.fixture
def stored(team):
    """What must not change: jobs, events, the ledger and the team's running quota totals."""

    def snapshot() -> tuple:
        quota = Quota.objects.get(team=team)
        return (
            Job.objects.count(),
            JobEvent.objects.count(),
            UsageEntry.objects.count(),
            quota.used_gpu_milli,
            quota.used_jobs,
        )

    return snapshot


@pytest.mark.parametrize(("changes", "field"), [pytest.param(c, f, id=i) for i, c, f in BAD_INPUT])
def test_bad_input_is_a_400_naming_the_field_and_stores_nothing(
    changes, field, member, team, image, api_client_for, stored, submit_job
) -> None:
    submit_job(member)  # some existing usage that must stay as it is
    before = stored()
    body = {**VALID, "team": team.pk, "image": image.pk, **changes}
    body = {key: value for key, value in body.items() if value is not None or key in ("gpu_milli",)}

    response = api_client_for(member).post("/api/v1/jobs/", body, format="json")

    assert response.status_code == 400, response.content
    error = response.json()
    assert set(error) == {"message", "code", "extra"}
    assert field in error["extra"]["fields"], error
    assert all(isinstance(m, str) and m for m in error["extra"]["fields"][field]), error
    assert stored() == before


@pytest.mark.parametrize(
    "raw",
    ['{"command": ["python"', "not json at all", '["a", "list"]', "null", '{"command": NaN}'],
    ids=["truncated", "garbage", "array", "null", "nan"],
)
def test_malformed_json_is_a_400_and_stores_nothing(raw, member, api_client_for, stored) -> None:
    before = stored()

    response = api_client_for(member).post("/api/v1/jobs/", raw, content_type="application/json")

    assert response.status_code == 400, response.content
    assert set(response.json()) == {"message", "code", "extra"}
    assert stored() == before


def test_a_retired_image_is_refused(member, team, image, api_client_for, stored) -> None:
    JobImage.objects.filter(pk=image.pk).update(is_active=False)
    before = stored()

    response = api_client_for(member).post(
        "/api/v1/jobs/", {**VALID, "team": team.pk, "image": image.pk}, format="json"
    )

    assert response.status_code == 400
    assert "retired" in response.json()["extra"]["fields"]["image"][0]
    assert stored() == before


def test_a_huge_body_is_a_400_not_a_500(member, team, image, api_client_for, settings, stored) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    before = stored()
    body = json.dumps({**VALID, "team": team.pk, "image": image.pk, "name": "x" * 20_000})

    response = api_client_for(member).post("/api/v1/jobs/", body, content_type="application/json")

    assert response.status_code == 400
    assert stored() == before


def test_more_than_the_teams_maximum_is_a_400_naming_the_limit(
    member, team, image, api_client_for, stored
) -> None:
    # Over the quota's *free* share a job is accepted and waits (tests/quotas); over the maximum
    # itself it could never run, so it is refused.
    Quota.objects.filter(team=team).update(max_gpu_milli=1000)
    before = stored()

    response = api_client_for(member).post(
        "/api/v1/jobs/",
        {**VALID, "gpu_milli": None, "gpus": 2, "team": team.pk, "image": image.pk},
        format="json",
    )

    assert response.status_code == 400
    assert "team Vision's maximum is 1, so it could never run" in str(
        response.json()["extra"]["fields"]["gpus"]
    )
    assert stored() == before


def test_a_command_line_string_is_split_like_a_shell(member, team, image, api_client_for) -> None:
    response = api_client_for(member).post(
        "/api/v1/jobs/",
        {
            "command": "python train.py --name 'my run'",
            "gpu_milli": 250,
            "team": "vision",
            "image": "pytorch:2.4",
        },
        format="json",
    )

    assert response.status_code == 201, response.content
    assert response.json()["command"] == ["python", "train.py", "--name", "my run"]


def test_the_preemption_fields_are_stored_and_shown(member, team, image, api_client_for) -> None:
    client = api_client_for(member)
    body = {"command": ["python", "train.py"], "team": "vision", "image": "pytorch:2.4", "gpus": 1}
    response = client.post(
        "/api/v1/jobs/",
        {**body, "preemptible": False, "min_runtime_seconds": 600, "allow_sharing": True,
         "preemption_grace_seconds": 90},
        format="json",
    )  # fmt: skip

    assert response.status_code == 201, response.content
    shown = response.json()
    assert (shown["preemptible"], shown["min_runtime_seconds"], shown["allow_sharing"]) == (False, 600, True)
    assert shown["preemption_grace_seconds"] == 90
    assert (shown["preemptions"], shown["migrations"], shown["time_lost_seconds"]) == (0, 0, 0.0)
    job = Job.objects.get(pk=shown["id"])
    assert (job.preemptible, job.min_runtime_seconds, job.allow_sharing) == (False, 600, True)

    defaults = client.post("/api/v1/jobs/", body, format="json").json()
    assert (defaults["preemptible"], defaults["min_runtime_seconds"], defaults["allow_sharing"]) == (
        True,
        0,
        False,
    )
    assert defaults["preemption_grace_seconds"] is None  # the platform default applies

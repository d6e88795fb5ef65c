"""The one validation path (jobs.validation.check_submission) through POST /api/v1/jobs/validate/ and
POST /api/v1/jobs/: every field error at once, the explicit GPU request, nothing stored."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job

pytestmark = pytest.mark.django_db

VALIDATE = "/api/v1/jobs/validate/"


def _post(api_client_for: Any, user: Any, path: str, body: Any) -> Any:
    return api_client_for(user).post(path, body, format="json")


def test_validate_answers_the_normalised_spec_and_stores_nothing(member, team, image, api_client_for) -> None:
    response = _post(
        api_client_for, member, VALIDATE, {"image": image.pk, "command": "python -c 'print(1)'", "gpus": 2}
    )

    assert response.status_code == 200, response.json()
    spec = response.json()["spec"]
    assert spec["command"] == ["python", "-c", "print(1)"]
    assert (spec["team"], spec["image"], spec["gpus"], spec["gpu_milli"]) == (
        "vision",
        "pytorch:2.4",
        2,
        None,
    )
    assert (spec["cpu_milli"], spec["replicas"], spec["preemptible"]) == (1000, 1, True)
    assert Job.objects.count() == 0


def test_validate_names_every_problem_at_once(member, team, image, api_client_for) -> None:
    body = {
        "image": image.pk,
        "command": 42,
        "gpu_milli": -5,
        "gpu_mili": 250,
        "replicas": 0,
        "env": {"LD_PRELOAD": "x.so", "OK": "1"},
        "priority": 5000,
    }

    response = _post(api_client_for, member, VALIDATE, body)

    assert response.status_code == 400
    fields = response.json()["extra"]["fields"]
    assert set(fields) == {"command", "gpu_milli", "gpu_mili", "replicas", "env", "priority"}
    assert fields["gpu_mili"] == ["Unknown field."]
    assert fields["gpu_milli"] == ["Must be between 1 and 999."]
    assert fields["replicas"] == ["Must be between 1 and 64."]
    assert "LD_PRELOAD" in fields["env"][0]


def test_submit_reports_the_same_errors_as_validate(member, team, image, api_client_for) -> None:
    body = {"image": image.pk, "command": ["t"], "gpus": -1, "colour": "red", "memory_mib": 0}

    checked = _post(api_client_for, member, VALIDATE, body)
    submitted = _post(api_client_for, member, "/api/v1/jobs/", body)

    assert checked.status_code == submitted.status_code == 400
    assert checked.json()["extra"]["fields"] == submitted.json()["extra"]["fields"]
    assert checked.json()["extra"]["fields"]["gpus"] == ["Must be between 0 and 64."]
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    ("request_", "fields", "field", "words"),
    [
        ("whole", {"gpus": 0}, "gpus", "ask for 1 to 64 whole GPUs"),
        ("whole", {"gpus": -3}, "gpus", "ask for 1 to 64 whole GPUs"),
        ("whole", {}, "gpus", "ask for 1 to 64 whole GPUs"),
        ("share", {}, "gpu_milli", "set gpu_milli (1-999)"),
        ("share", {"gpus": 1, "gpu_milli": 200}, "gpu_milli", "cannot be combined with gpus"),
        ("cpu", {"gpu_milli": 200}, "gpu_request", "CPU only"),
    ],
)
def test_the_gpu_request_must_match_what_the_job_asks_for(
    request_: str, fields: dict[str, Any], field: str, words: str, member, team, image, api_client_for
) -> None:
    body = {"image": image.pk, "command": ["t"], "gpu_request": request_, **fields}

    response = _post(api_client_for, member, VALIDATE, body)

    assert response.status_code == 400
    assert words in " ".join(response.json()["extra"]["fields"][field])


@pytest.mark.parametrize(
    ("request_", "fields"),
    [("whole", {"gpus": 2}), ("share", {"gpu_milli": 300}), ("cpu", {}), ("cpu", {"gpus": 0})],
)
def test_a_gpu_request_that_matches_is_accepted(
    request_, fields, member, team, image, api_client_for
) -> None:
    body = {"image": image.pk, "command": ["t"], "gpu_request": request_, **fields}

    assert _post(api_client_for, member, VALIDATE, body).status_code == 200


def test_validate_refuses_an_unknown_team_and_image_beside_the_spec(member, team, api_client_for) -> None:
    response = _post(api_client_for, member, VALIDATE, {"team": "nope", "image": "nope:1", "command": ["t"]})

    assert response.status_code == 400
    assert set(response.json()["extra"]["fields"]) == {"team", "image"}


def test_a_viewer_may_not_validate_a_submission(viewer, team, image, api_client_for) -> None:
    response = _post(api_client_for, viewer, VALIDATE, {"image": image.pk, "command": ["t"], "team": team.pk})

    assert response.status_code == 403


def test_validate_needs_an_object(member, team, api_client_for) -> None:
    response = _post(api_client_for, member, VALIDATE, [1, 2])

    assert response.status_code == 400
    assert response.json()["extra"]["fields"] == {"non_field_errors": ["Send a JSON object of job fields."]}


def test_validate_refuses_what_no_node_could_ever_hold_as_submit_does(
    member, team, image, api_client_for
) -> None:
    # The simulated demo cluster's nodes have 8 GPUs at most, and no A100.
    for body, field in (
        ({"image": image.pk, "gpus": 9, "command": ["true"]}, "gpus"),
        ({"image": image.pk, "gpus": 1, "gpu_models": ["A100"], "command": ["true"]}, "gpu_models"),
    ):
        checked = _post(api_client_for, member, VALIDATE, body)
        submitted = _post(api_client_for, member, "/api/v1/jobs/", body)

        assert (checked.status_code, submitted.status_code) == (400, 400), (checked.json(), submitted.json())
        assert field in checked.json()["extra"]["fields"], checked.json()
        assert checked.json()["extra"]["fields"][field] == submitted.json()["extra"]["fields"][field]
    assert Job.objects.count() == 0

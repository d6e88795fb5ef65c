"""The API's submit checks once: check_submission (the cluster's checks included) and then
job_submit_checked, which stores the job without a second pass. What it stores (the row, its three
events and their actors and reasons) is what job_submit stores for the same spec."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.forms.models import model_to_dict

from jobs import services, specs, validation
from jobs.models import Job, JobEvent
from jobs.services import QUEUED_REASON, job_submit

pytestmark = pytest.mark.django_db

BODY = {"team": "vision", "image": "pytorch:2.4", "command": "python train.py", "gpu_milli": 250}
# Columns that differ between any two submissions of the same spec.
PER_SUBMISSION = {"id", "created_at", "submitted_at", "updated_at"}


def _row(job: Job) -> dict[str, Any]:
    return {k: v for k, v in model_to_dict(job).items() if k not in PER_SUBMISSION}


def _events(job: Job) -> list[tuple[str, str, str, str]]:
    return list(
        JobEvent.objects.filter(job=job)
        .order_by("created_at", "id")
        .values_list("from_status", "to_status", "actor", "reason")
    )


def test_the_api_stores_the_same_row_and_events_as_job_submit(
    api_client_for, member, team, image, job_spec
) -> None:
    response = api_client_for(member).post("/api/v1/jobs/", BODY, format="json")
    assert response.status_code == 201, response.json()
    via_api = Job.objects.get(pk=response.json()["id"])
    via_service = job_submit(
        user=member, spec=job_spec(name="", command=["python", "train.py"]), image=image, team=team
    )

    assert _row(via_api) == _row(via_service)
    assert (
        _events(via_api)
        == _events(via_service)
        == [
            ("", "DRAFT", member.username, "created"),
            ("DRAFT", "SUBMITTED", member.username, "submitted"),
            ("SUBMITTED", "QUEUED", "system", QUEUED_REASON),
        ]
    )
    assert via_api.submitted_at == via_api.created_at == via_api.updated_at


def test_the_api_runs_the_specs_rules_and_the_cluster_checks_once_per_submit(
    api_client_for, member, image
) -> None:
    rules = mock.Mock(wraps=specs.validate_job_spec)
    cluster = mock.Mock(wraps=services.cluster_problems)
    with (
        mock.patch.object(validation, "validate_job_spec", rules),
        mock.patch.object(services, "validate_job_spec", rules),
        mock.patch.object(services, "cluster_problems", cluster),
    ):
        response = api_client_for(member).post("/api/v1/jobs/", BODY, format="json")

    assert response.status_code == 201, response.json()
    assert (rules.call_count, cluster.call_count) == (1, 1)


def test_a_request_no_node_could_hold_is_refused_by_the_api_with_the_field_and_nothing_stored(
    api_client_for, member, team, image
) -> None:
    from quotas.models import Quota

    Quota.objects.filter(team=team).update(max_gpu_milli=100)
    response = api_client_for(member).post("/api/v1/jobs/", BODY, format="json")

    assert response.status_code == 400
    assert "so it could never run" in response.json()["extra"]["fields"]["gpus"][0]
    assert Job.objects.count() == 0


def test_an_api_submit_reads_the_database_a_bounded_number_of_times(
    api_client_for, member, image, django_assert_max_num_queries
) -> None:
    client = api_client_for(member)
    client.post("/api/v1/jobs/", BODY, format="json")  # the token's first use writes its last_used
    # Authentication, team, image, quota, the insert with its events, and the response's reads: the
    # twice-checked submit took about thirty.
    with django_assert_max_num_queries(16):
        response = client.post("/api/v1/jobs/", BODY, format="json")
    assert response.status_code == 201

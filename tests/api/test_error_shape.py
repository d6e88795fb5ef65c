"""Everything under /api/ answers in the one error shape, and bad input is a 400, never a 500."""

from __future__ import annotations

import json

import pytest
from django.test import RequestFactory

from config import api
from config.parsers import json_depth_exceeds

pytestmark = pytest.mark.django_db


def _assert_error_shape(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert set(body) == {"message", "code", "extra"}
    assert isinstance(body["message"], str) and body["message"]
    if code is not None:
        assert body["code"] == code
    return body


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/nothing-here/",
        "/api/v1/jobs/abc/",
        "/api/v1/jobs/1/nothing/",
        "/api/v1/teams/x/members/",
        "/api/v2/jobs/",
        "/api/",
        "/api",
    ],
)
def test_unknown_api_paths_are_a_json_404(path, api_client_for, member) -> None:
    _assert_error_shape(api_client_for(member).get(path), 404, "not_found")


def test_an_unknown_api_path_is_json_also_with_debug_on(settings, api_client_for, member) -> None:
    settings.DEBUG = True

    _assert_error_shape(api_client_for(member).get("/api/v1/jobs/not-a-number/"), 404, "not_found")


def test_a_post_to_an_unknown_api_path_with_a_session_is_a_404_not_a_csrf_page(client, member) -> None:
    client.force_login(member)

    _assert_error_shape(client.post("/api/v1/nothing/", {}), 404, "not_found")


def test_a_session_write_without_the_csrf_token_is_a_json_403(member, job_spec) -> None:
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(member)

    body = _assert_error_shape(client.post("/api/v1/jobs/", {}, content_type="application/json"), 403)
    assert "CSRF" in body["message"]


def test_a_wrong_method_is_a_json_405(api_client_for, member) -> None:
    _assert_error_shape(api_client_for(member).delete("/api/v1/health"), 405, "method_not_allowed")


def test_pages_outside_the_api_keep_their_html_404(client, member) -> None:
    client.force_login(member)

    response = client.get("/no-such-page/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize(
    "query, field",
    [
        ("image=1e30", "image"),
        ("team=99999999999999999999", "team"),
        ("team=-1", "team"),
        ("image=abc", "image"),
        ("created_before=", "created_before"),
        ("created_after=99999-01-01", "created_after"),
        ("page_size=0", "page_size"),
        ("page_size=many", "page_size"),
    ],
)
def test_filter_values_out_of_range_or_unparsable_are_a_400_naming_the_field(
    query, field, api_client_for, member
) -> None:
    body = _assert_error_shape(api_client_for(member).get(f"/api/v1/jobs/?{query}"), 400, "invalid")
    assert field in body["extra"]["fields"]


def test_a_boolean_filter_refuses_what_is_not_a_boolean(api_client_for, member) -> None:
    client = api_client_for(member)

    body = _assert_error_shape(client.get("/api/v1/images/?is_active=null"), 400, "invalid")

    assert "is_active" in body["extra"]["fields"]
    assert client.get("/api/v1/images/?is_active=true").status_code == 200


def test_a_text_filter_with_a_nul_character_matches_nothing(api_client_for, member, submit_job) -> None:
    submit_job(member)

    response = api_client_for(member).get("/api/v1/jobs/?team_slug=vis%00ion")

    assert response.status_code == 200
    assert response.json()["count"] == 0


def test_an_empty_status_list_is_no_filter(api_client_for, member, submit_job) -> None:
    submit_job(member)

    response = api_client_for(member).get("/api/v1/jobs/?status=")

    assert response.status_code == 200
    assert response.json()["count"] == 1


def test_an_id_filter_within_range_still_filters(api_client_for, member, submit_job, team) -> None:
    submit_job(member)
    client = api_client_for(member)

    assert client.get(f"/api/v1/jobs/?team={team.pk}").json()["count"] == 1
    assert client.get(f"/api/v1/jobs/?team={team.pk + 1000}").json()["count"] == 0


def test_json_nested_deeper_than_the_limit_is_a_400(api_client_for, member) -> None:
    body = '{"a":' * 5000 + "1" + "}" * 5000

    response = api_client_for(member).post("/api/v1/jobs/", body, content_type="application/json")

    parsed = _assert_error_shape(response, 400, "parse_error")
    assert "32 levels" in parsed["message"]


def test_json_within_the_nesting_limit_reaches_the_serializer(api_client_for, member) -> None:
    body = json.dumps({"env": {"A": "1"}, "command": ["true"], "image": 999})

    response = api_client_for(member).post("/api/v1/jobs/", body, content_type="application/json")

    assert _assert_error_shape(response, 400)["code"] == "invalid"


def test_nan_is_not_json(api_client_for, member) -> None:
    response = api_client_for(member).post(
        "/api/v1/jobs/", '{"slowdown_tolerance": NaN}', content_type="application/json"
    )

    _assert_error_shape(response, 400, "parse_error")


def test_form_encoded_bodies_are_refused_with_415(api_client_for, member) -> None:
    response = api_client_for(member).post("/api/v1/jobs/", {"image": "1"}, format="multipart")

    _assert_error_shape(response, 415, "unsupported_media_type")


def test_nesting_is_counted_outside_strings_only() -> None:
    assert not json_depth_exceeds('{"a": "[[[[[[[[[[[[{{{{{{{{{{"}', 3)
    assert not json_depth_exceeds('{"a": "\\"[[[[[[["}', 2)
    assert json_depth_exceeds('{"a": [[[1]]]}', 3)
    assert not json_depth_exceeds('{"a": [[[1]]]}', 4)
    assert not json_depth_exceeds("[[1], [2], [3], [4], [5]]", 2)


def test_errors_raised_outside_api_views_answer_json_under_api_and_html_elsewhere() -> None:
    factory = RequestFactory()

    under_api = api.handler500(factory.get("/api/v1/jobs/"))
    elsewhere = api.handler500(factory.get("/jobs/"))
    bad = api.handler400(factory.get("/api/v1/jobs/"), Exception("Invalid HTTP_HOST header: 'x'"))

    assert json.loads(under_api.content)["code"] == "server_error"
    assert under_api.status_code == 500
    assert elsewhere["Content-Type"].startswith("text/html")
    assert json.loads(bad.content) == {"message": "Bad request.", "code": "bad_request", "extra": {}}


def test_job_answers_match_the_schema_enum_and_nullability(api_client_for, member, submit_job) -> None:
    submit_job(member)
    client = api_client_for(member)

    schema = client.get("/api/schema/?format=json").json()["components"]["schemas"]
    job = client.get("/api/v1/jobs/").json()["results"][0]

    failure = schema["JobOutput"]["properties"]["failure_category"]
    blank_refs = [ref["$ref"].rsplit("/", 1)[1] for ref in failure["oneOf"]]
    allowed = {value for name in blank_refs for value in schema[name]["enum"]}
    assert job["failure_category"] == "" and "" in allowed
    assert schema["JobOutput"]["properties"]["queue_position"]["nullable"] is True

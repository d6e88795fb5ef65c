"""Login lockouts and rate limits: 429 with Retry-After, in the one error shape (accounts.throttles)."""

from __future__ import annotations

import time

import pytest
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

TOKEN_URL = "/api/v1/auth/token/"


def _login(client: APIClient, username: str, password: str, **extra: str):
    return client.post(TOKEN_URL, {"username": username, "password": password}, format="json", **extra)


def _assert_throttled(response) -> int:
    assert response.status_code == 429
    retry_after = int(response["Retry-After"])
    assert retry_after >= 1
    body = response.json()
    assert body["code"] == "throttled"
    assert set(body) == {"message", "code", "extra"}
    assert body["extra"]["retry_after"] >= 1
    return retry_after


def test_200_wrong_passwords_are_refused_five_times_then_locked_out(member) -> None:
    client = APIClient()

    codes = [_login(client, "max", f"guess-{i}").status_code for i in range(200)]

    assert codes[:5] == [400] * 5
    assert set(codes[5:]) == {429}


def test_the_lockout_says_when_to_retry_within_the_window(member, settings) -> None:
    settings.LOGIN_FAILURE_WINDOW_SECONDS = 600
    client = APIClient()
    for i in range(5):
        _login(client, "max", f"guess-{i}")

    retry_after = _assert_throttled(_login(client, "max", "guess-6"))

    assert 1 <= retry_after <= 600


def test_a_locked_out_username_is_refused_even_with_the_right_password(member) -> None:
    client = APIClient()
    for i in range(5):
        _login(client, "max", f"guess-{i}")

    _assert_throttled(_login(client, "max", "max-password-1"))


def test_usernames_are_locked_out_whatever_their_case(member) -> None:
    client = APIClient()
    for i in range(5):
        _login(client, "MAX" if i % 2 else "max", f"guess-{i}")

    _assert_throttled(_login(client, "Max", "max-password-1"))


def test_the_lockout_ends_with_its_window(member, settings, monkeypatch) -> None:
    settings.LOGIN_FAILURE_WINDOW_SECONDS = 60
    client = APIClient()
    for i in range(5):
        _login(client, "max", f"guess-{i}")
    _assert_throttled(_login(client, "max", "max-password-1"))

    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)

    assert _login(client, "max", "max-password-1").status_code == 201


def test_a_good_login_clears_its_usernames_failures(member) -> None:
    client = APIClient()
    for i in range(4):
        _login(client, "max", f"guess-{i}")

    assert _login(client, "max", "max-password-1").status_code == 201
    codes = [_login(client, "max", f"again-{i}").status_code for i in range(5)]

    assert codes == [400] * 5


def test_one_address_guessing_many_usernames_is_locked_out(member, settings) -> None:
    settings.LOGIN_FAILURES_PER_ADDRESS = 10
    client = APIClient()

    codes = [_login(client, f"user-{i}", "guess").status_code for i in range(12)]

    assert codes[:10] == [400] * 10
    assert codes[10:] == [429, 429]
    # Another address is not locked out.
    other = _login(client, "max", "max-password-1", REMOTE_ADDR="10.0.0.9")
    assert other.status_code == 201


def test_a_forged_forwarded_for_header_does_not_escape_the_address_lockout(member, settings) -> None:
    settings.LOGIN_FAILURES_PER_ADDRESS = 3
    client = APIClient()

    codes = [
        _login(client, f"user-{i}", "guess", HTTP_X_FORWARDED_FOR=f"203.0.113.{i}").status_code
        for i in range(5)
    ]

    assert codes == [400, 400, 400, 429, 429]


def test_behind_a_trusted_proxy_the_forwarded_address_is_the_client(member, settings) -> None:
    settings.LOGIN_FAILURES_PER_ADDRESS = 2
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    client = APIClient()

    first = [_login(client, f"u{i}", "x", HTTP_X_FORWARDED_FOR="198.51.100.1").status_code for i in range(3)]
    second = _login(client, "u9", "x", HTTP_X_FORWARDED_FOR="198.51.100.2").status_code

    assert first == [400, 400, 429]
    assert second == 400


def test_the_token_endpoint_is_rate_limited_per_address_even_for_good_logins(member, settings) -> None:
    settings.API_THROTTLE_RATES = {**settings.API_THROTTLE_RATES, "auth": "3/minute"}
    client = APIClient()

    codes = [_login(client, "max", "max-password-1").status_code for _ in range(4)]

    assert codes[:3] == [201, 201, 201]
    _assert_throttled(_login(client, "max", "max-password-1"))


def test_api_writes_are_rate_limited_per_user(member, owner, submit_job, api_client_for, settings) -> None:
    settings.API_THROTTLE_RATES = {**settings.API_THROTTLE_RATES, "write": "2/minute"}
    job = submit_job(member)
    client = api_client_for(member)

    codes = [client.post(f"/api/v1/jobs/{job.pk}/cancel/").status_code for _ in range(2)]
    throttled = client.post(f"/api/v1/jobs/{job.pk}/cancel/")

    assert codes == [200, 200]
    _assert_throttled(throttled)
    # Reads are not counted, and another user has a budget of their own.
    assert client.get("/api/v1/jobs/").status_code == 200
    assert api_client_for(owner).post(f"/api/v1/jobs/{job.pk}/clone/").status_code == 201


def test_an_empty_rate_turns_a_limit_off(member, submit_job, api_client_for, settings) -> None:
    settings.API_THROTTLE_RATES = {**settings.API_THROTTLE_RATES, "write": ""}
    job = submit_job(member)
    client = api_client_for(member)

    codes = {client.post(f"/api/v1/jobs/{job.pk}/cancel/").status_code for _ in range(10)}

    assert codes == {200}


def test_the_portal_login_is_locked_out_after_repeated_failures(member) -> None:
    client = Client()

    codes = [client.post("/login/", {"username": "max", "password": f"g{i}"}).status_code for i in range(5)]
    locked = client.post("/login/", {"username": "max", "password": "max-password-1"})

    assert codes == [200] * 5
    assert locked.status_code == 429
    assert int(locked["Retry-After"]) >= 1
    assert b"Too many failed logins" in locked.content
    assert "_auth_user_id" not in client.session


def test_the_portal_and_the_token_endpoint_share_one_lockout(member) -> None:
    client = Client()
    for i in range(5):
        client.post("/login/", {"username": "max", "password": f"g{i}"})

    _assert_throttled(_login(APIClient(), "max", "max-password-1"))


def test_the_admin_login_is_locked_out_after_repeated_failures(member) -> None:
    client = Client()
    for i in range(5):
        client.post("/admin/login/", {"username": "max", "password": f"g{i}"})

    locked = client.post("/admin/login/", {"username": "max", "password": "max-password-1"})

    assert locked.status_code == 429
    assert int(locked["Retry-After"]) >= 1


def test_a_good_portal_login_still_signs_in(member) -> None:
    client = Client()

    response = client.post("/login/", {"username": "max", "password": "max-password-1"})

    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(member.pk)


def test_every_operation_documents_the_throttled_answer(client) -> None:
    schema = client.get("/api/schema/?format=json").json()

    missing = [
        f"{method.upper()} {path}"
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in {"get", "post", "put", "patch", "delete"} and "429" not in operation["responses"]
    ]

    assert missing == []

"""The API tokens page (/tokens/): a researcher creates a named, expiring token in the portal, sees
its value once, uses it against the REST API, and revokes it (after a confirmation), after which the
API refuses it. Tokens of other users are neither listed nor revocable."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import ApiToken
from accounts.services import token_create
from tests.frontend import portal_browser
from tests.frontend.portal_browser import (
    Console,
    browser_test,
    check_phone_width,
    log_in,
    new_page,
    shot,
    sync_api,
    unlabelled_controls,
)

browser = portal_browser.browser  # the module's Chromium (a fixture)


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_a_new_token_is_shown_once_and_only_its_hash_is_kept(member: Any) -> None:
    client = _client(member)
    response = client.post("/tokens/", {"name": "ci", "expires_in_days": "7"})
    assert response.status_code == 200
    raw = response.context["raw_token"]
    token = ApiToken.objects.get(user=member, name="ci")
    assert raw.startswith("gpu_") and raw.encode() in response.content
    assert token.key_hash != raw and token.prefix == raw[:8]
    assert abs(token.expires_at - (timezone.now() + dt.timedelta(days=7))) < dt.timedelta(minutes=1)
    # The list shows the token afterwards, never its value.
    assert raw.encode() not in client.get("/tokens/").content


@pytest.mark.django_db
def test_a_token_form_with_bad_values_answers_400_with_field_messages(member: Any) -> None:
    response = _client(member).post("/tokens/", {"name": "", "expires_in_days": "100000"})
    assert response.status_code == 400
    form = response.context["form"]
    assert set(form.errors) == {"name", "expires_in_days"}
    assert not ApiToken.objects.filter(user=member).exists()


@pytest.mark.django_db
def test_nobody_revokes_or_sees_another_users_token(member: Any, owner: Any) -> None:
    token, _ = token_create(user=owner, name="owner-laptop")
    client = _client(member)
    assert b"owner-laptop" not in client.get("/tokens/").content
    assert client.post(f"/tokens/{token.pk}/revoke/").status_code == 404
    assert client.get(f"/tokens/{token.pk}/revoke/").status_code == 405
    token.refresh_from_db()
    assert token.revoked_at is None


@browser_test
@pytest.mark.django_db(transaction=True)
def test_a_researcher_creates_uses_and_revokes_an_api_token_in_the_portal(
    browser: Any, live_server: Any, member: Any, owner: Any
) -> None:
    expect = sync_api().expect
    token_create(user=owner, name="not-yours")
    base = live_server.url
    console = Console()
    page = new_page(browser, console)
    log_in(page, base, "max", then="/jobs/")
    page.get_by_role("link", name="API tokens").click()
    page.wait_for_url(f"{base}/tokens/")
    expect(page.locator("#tokens-table")).to_contain_text("You have no API tokens yet.")
    assert unlabelled_controls(page) == []
    expect(page.get_by_role("link", name="API docs").first).to_have_attribute("href", "/api/docs/")

    page.get_by_label("Name").fill("laptop")
    page.get_by_label("Expires after").select_option(label="30 days")
    page.get_by_role("button", name="Create token").click()
    value = page.get_by_label("Your new token")
    expect(value).to_have_value(re.compile(r"^gpu_"))
    raw = value.input_value()
    expect(value).to_be_focused()
    row = page.locator("#tokens-table tbody tr[data-token-id]")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("laptop")
    expect(row).to_contain_text(raw[:8])
    expires = (timezone.now() + dt.timedelta(days=30)).strftime("%Y-%m-%d")
    expect(row).to_contain_text(expires)
    shot(page, "tokens.png")

    # The token works against the REST API (as this user: their team's jobs, no session cookie).
    fresh = browser.new_context()
    answer = fresh.request.get(f"{base}/api/v1/teams/", headers={"Authorization": f"Bearer {raw}"})
    assert answer.status == 200 and [t["slug"] for t in answer.json()] == ["vision"]

    # Reloading does not show the value again.
    page.goto(f"{base}/tokens/")
    assert page.get_by_label("Your new token").count() == 0
    assert raw not in page.content()

    # Revoke, after the browser's confirmation; a dismissed confirmation changes nothing.
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name=re.compile(r"^Revoke token laptop")).click()
    expect(row).to_have_attribute("data-active", "true")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=re.compile(r"^Revoke token laptop")).click()
    expect(page.get_by_role("status")).to_contain_text("is revoked")
    expect(page.locator("#tokens-table tbody tr[data-token-id]")).to_have_attribute("data-active", "false")
    expect(page.locator("#tokens-table .token-state")).to_contain_text("revoked")
    answer = fresh.request.get(f"{base}/api/v1/teams/", headers={"Authorization": f"Bearer {raw}"})
    assert answer.status == 401
    fresh.close()
    assert ApiToken.objects.get(user=member).revoked_at is not None

    check_phone_width(browser, console, base, "max", ["/tokens/"])
    # (The refused request ran in an unwatched context: the portal's own pages logged nothing.)
    assert console.errors == []

"""Content-Security-Policy on every page, no inline code in the portal, Swagger UI from the package."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

pytestmark = pytest.mark.django_db


class _InlineCode(HTMLParser):
    """Collects what a CSP without 'unsafe-inline' would block: inline scripts, event-handler
    attributes, javascript: URLs, <style> elements and style attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_inline_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        kind = dict(attrs).get("type") or "text/javascript"
        # json_script's <script type="application/json"> is data a browser never runs.
        if tag == "script" and "src" not in names and "json" not in kind:
            self._in_inline_script = True
        if tag == "style":
            self.found.append("<style>")
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}=...>")
            if name == "style":
                self.found.append(f"<{tag} style=...>")
            if name in {"href", "src", "action"} and (value or "").strip().lower().startswith("javascript:"):
                self.found.append(f"<{tag} {name}=javascript:...>")

    def handle_data(self, data: str) -> None:
        if self._in_inline_script and data.strip():
            self.found.append(f"inline <script>: {data.strip()[:60]}")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_inline_script = False


def _inline_code(html: bytes) -> list[str]:
    parser = _InlineCode()
    parser.feed(html.decode())
    return parser.found


def _directives(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    parts = [part.strip().split() for part in header.split(";") if part.strip()]
    return {part[0]: part[1:] for part in parts}


def test_portal_pages_send_a_policy_without_unsafe_inline_or_eval(client, member) -> None:
    client.force_login(member)

    policy = _directives(client.get("/"))

    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert "'unsafe-inline'" not in str(policy) and "'unsafe-eval'" not in str(policy)


@pytest.mark.parametrize(
    "path", ["/", "/jobs/", "/jobs/new/", "/jobs/{job}/", "/teams/", "/teams/{team}/", "/images/"]
)
def test_portal_pages_carry_no_inline_code(path, client, member, submit_job, team) -> None:
    job = submit_job(member)
    client.force_login(member)

    response = client.get(path.format(job=job.pk, team=team.pk), follow=True)

    assert response.status_code == 200
    assert "Content-Security-Policy" in response
    assert _inline_code(response.content) == []


def test_the_login_page_and_its_lockout_page_carry_no_inline_code(client, member) -> None:
    page = client.get("/login/")
    for i in range(5):
        client.post("/login/", {"username": "max", "password": f"g{i}"})
    locked = client.post("/login/", {"username": "max", "password": "g6"})

    assert locked.status_code == 429
    assert _inline_code(page.content) == []
    assert _inline_code(locked.content) == []
    assert "Content-Security-Policy" in locked


def test_swagger_ui_is_served_from_the_package_with_no_inline_code(client) -> None:
    page = client.get("/api/docs/")

    assert page.status_code == 200
    html = page.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower() and "https://" not in html
    assert _inline_code(page.content) == []


def test_swagger_uis_start_up_script_and_bundle_are_served_here(client) -> None:
    from django.contrib.staticfiles import finders

    script = client.get("/api/docs/?script=")

    assert script.status_code == 200
    assert b"SwaggerUIBundle" in script.content
    assert b"/api/schema/" in script.content
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")


# ------------------------------------------------------------------ the chart library under the policy
#
# The portal's charts (uPlot) style their elements through the CSSOM, which the policy allows, and
# take their rules from the package's own style sheet, served from this origin like the script.


@pytest.mark.parametrize("path", ["/", "/teams/{team}/"])
def test_pages_with_charts_load_the_chart_library_from_this_origin(path, client, member, team) -> None:
    client.force_login(member)

    html = client.get(path.format(team=team.pk), follow=True).content.decode()

    assert '<script src="/vendor/uplot.min.js" defer></script>' in html
    assert '<link rel="stylesheet" href="/vendor/uplot.min.css">' in html
    assert "<style" not in html

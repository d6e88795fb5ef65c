"""Content-Security-Policy on every page, no inline code in the portal, Swagger UI from the package."""

from __future__ import annotations

import re
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


# ------------------------------------------------------------------ plotly's styles as a file
#
# plotly.js injects its base styles as an inline <style> element, which the policy blocks. It skips
# that when the page already has an element with id "plotly.js-style-global" and class
# "no-inline-styles" (plotly's documented switch for strict CSP); the dashboard and team pages link
# frontend/static/frontend/plotly.css so, and that file holds the same rules, extracted from the
# installed bundle: `python tests/api/test_security_headers.py > frontend/static/frontend/plotly.css`
# after upgrading plotly (the test below says when).

PLOTLY_CSS = "frontend/static/frontend/plotly.css"


_JS_TOKEN = re.compile(r""""((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|([A-Za-z_$][\w$]*)(?=:)""")


def _js_strings(text: str) -> list[str]:
    """Keys and values, in order, of a JS object literal whose values are strings (a key may be a
    bare identifier, as the minifier leaves ``Y``)."""
    out = []
    for match in _JS_TOKEN.finditer(text):
        raw = next(group for group in match.groups() if group is not None)
        out.append(re.sub(r"\\(.)", r"\1", raw))
    return out


def plotly_css() -> str:
    import plotly

    from frontend.views import _plotly_js

    bundle = _plotly_js().read_text()
    start = bundle.index('{"X,X div"')
    depth, end, quote = 0, start, None
    while True:  # the object literal's closing brace, skipping string contents
        char = bundle[end]
        if quote:
            if char == "\\":
                end += 1
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                break
        end += 1
    strings = _js_strings(bundle[start + 1 : end])
    lines = [
        f"/* plotly.js base styles from the plotly {plotly.__version__} package (see the test that checks it) */"
    ]
    for selector, body in zip(strings[::2], strings[1::2], strict=True):
        # plotly's own expansion of its selector shorthand (X: a plot, Y: the notifier).
        full = selector.replace(",", " ,", 1) if selector.startswith(",") else selector
        full = full.replace("X", ".js-plotly-plot .plotly").replace("Y", ".plotly-notifier")
        lines.append(f"{full}{{{body}}}")
    return "\n".join(lines) + "\n"


def test_the_plotly_stylesheet_matches_the_installed_bundle() -> None:
    from pathlib import Path

    shipped = (Path(__file__).resolve().parents[2] / PLOTLY_CSS).read_text()

    assert shipped == plotly_css(), f"regenerate {PLOTLY_CSS}: python tests/api/test_security_headers.py"


@pytest.mark.parametrize("path", ["/", "/teams/{team}/"])
def test_pages_with_charts_turn_off_plotlys_inline_styles(path, client, member, team) -> None:
    client.force_login(member)

    html = client.get(path.format(team=team.pk), follow=True).content.decode()

    assert 'id="plotly.js-style-global"' in html
    assert "no-inline-styles" in html
    assert "frontend/plotly.css" in html
    # The id whose presence makes the bundle skip injecting its map library's CSS.
    from frontend.views import _plotly_js

    skip_id = re.search(r'getElementById\("([0-9a-f]{64})"\)\)\{var e=document.createElement\("style"\)',
                        _plotly_js().read_text()).group(1)  # fmt: skip
    assert f'id="{skip_id}"' in html


if __name__ == "__main__":
    import os
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(root / "platform"), str(root)]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    sys.stdout.write(plotly_css())

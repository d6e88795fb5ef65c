"""The simulated backend's stand-in for a workspace's server (issue 25): a tiny HTTP page, so the
portal's Open flow (the button, the proxy, its access rules) can be tried and tested without Jupyter.

One server per process, on a free port of 127.0.0.1, started on first use by whoever asks where a
simulated workspace is (the web process's proxy). It answers every path with a page that names the
workspace from the path, and says whether the platform's token came with the request (it always does
through the proxy; the page never shows it).
"""

from __future__ import annotations

import html
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TITLE = "Simulated workspace"
_PATH = re.compile(r"^/workspaces/(\d+)/")
_lock = threading.Lock()
_server: ThreadingHTTPServer | None = None


class _StandIn(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        found = _PATH.match(self.path)
        job = found.group(1) if found else "?"
        authorised = self.headers.get("Authorization", "").startswith("token ")
        body = (
            f"<!doctype html><html><head><title>{TITLE} {html.escape(job)}</title></head><body>"
            f"<h1>{TITLE} {html.escape(job)}</h1><p>The simulated cluster runs no real server; this page "
            f"stands in for one, reached through the platform's proxy.</p>"
            f"<p id='token'>{'token received' if authorised else 'no token'}</p></body></html>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        return  # quiet: the proxy logs the requests that matter


def ensure_started() -> str:
    """The stand-in's address (``http://127.0.0.1:PORT``), starting it once per process."""
    global _server
    with _lock:
        if _server is None:
            _server = ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
            _server.daemon_threads = True
            threading.Thread(target=_server.serve_forever, name="workspace-standin", daemon=True).start()
        return f"http://127.0.0.1:{_server.server_address[1]}"

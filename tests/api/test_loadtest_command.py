"""``manage.py loadtest`` refuses settings that cannot describe a load, with one line saying why."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"clients": 0}, "--clients must be >= 1"),
        ({"duration": 0}, "--duration > 0"),
        ({"think_time": -0.5}, "--think-time must be >= 0"),
        ({"url": "http://127.0.0.1:9"}, "--url needs --token"),
    ],
)
def test_loadtest_rejects_settings_that_describe_no_load(
    options: dict[str, object], message: str, tmp_path
) -> None:
    out = tmp_path / "load.json"
    with pytest.raises(CommandError, match=message):
        call_command("loadtest", out=str(out), **options)
    assert not out.exists()  # nothing is written for a refused run


def test_a_run_against_a_server_counts_every_kind_and_records_the_load_around_it() -> None:
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from jobs.management.commands.loadtest import MIX, Command

    class Answer(BaseHTTPRequestHandler):
        def _reply(self, status: int, body: dict) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self._reply(200, {})

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self._reply(201, {"id": 7})

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    options = {"warmup": 0.0, "duration": 1.5, "clients": 3, "seed": 0, "timeout": 5.0, "think_time": 0.0}
    try:
        result = Command()._run(
            f"http://127.0.0.1:{server.server_address[1]}", ["t"], 1, None,
            {**options, "database_url": "", "redis_url": ""},
        )  # fmt: skip
    finally:
        server.shutdown()

    assert result["requests"] > 0
    assert result["errors"]["total"] == 0 and result["client_errors"] == 0
    assert set(result["latency"]) <= {"all", *(kind for kind, _ in MIX)}
    assert {"submit", "list"} <= set(result["latency"])
    assert {"loadavg_1m_at_start", "loadavg_1m_at_end"} <= set(result["machine"])
    assert result["config"]["database_pool_max_size"] == 0  # SQLite: no pool

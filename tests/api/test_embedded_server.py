"""The embedded default is a real server: gunicorn with several workers over SQLite in WAL mode.

Timings are the load benchmark's business (``manage.py loadtest``, docs/benchmarks.md); these tests
only check behaviour: the settings, and that 50 clients at once are all answered.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.db.backends.sqlite3.base import DatabaseWrapper

from jobs.management.commands.runplatform import Command as RunPlatform

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db  # lets pytest-django allow this extra connection; the test database is unused
def test_sqlite_connections_use_wal_a_busy_timeout_and_immediate_transactions(tmp_path) -> None:
    options = dict(settings.SQLITE_OPTIONS)  # what the embedded default's SQLite file gets
    wrapper = DatabaseWrapper(
        {
            **settings.DATABASES["default"],
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(tmp_path / "db.sqlite3"),
            "OPTIONS": options,
            "TEST": {},
        },
        alias="wal-check",
    )
    try:
        with wrapper.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            journal = cursor.fetchone()[0]
            cursor.execute("PRAGMA busy_timeout")
            busy_ms = cursor.fetchone()[0]
    finally:
        wrapper.close()

    assert journal == "wal"
    assert busy_ms >= 10_000
    assert options["transaction_mode"] == "IMMEDIATE"
    # WAL is a property of the file: any other process opening it reads beside the writer.
    with sqlite3.connect(tmp_path / "db.sqlite3") as plain:
        assert plain.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_make_run_serves_with_gunicorn_and_a_worker_count_for_the_machine(monkeypatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    command = RunPlatform()._web_command(REPO_ROOT, {"host": "127.0.0.1", "port": 8000, "web": "gunicorn"})

    monkeypatch.setattr("os.cpu_count", lambda: 64)
    big = RunPlatform()._web_command(REPO_ROOT, {"host": "127.0.0.1", "port": 8000, "web": "gunicorn"})

    assert command[1:4] == ["-m", "gunicorn", "config.asgi:application"]
    assert command[command.index("--worker-class") + 1] == "uvicorn_worker.UvicornWorker"
    assert command[command.index("--workers") + 1] == "5"
    assert big[big.index("--workers") + 1] == "9"
    assert "runserver" not in command


def test_runplatform_defaults_to_gunicorn() -> None:
    parser = RunPlatform().create_parser("manage.py", "runplatform")

    assert parser.parse_args([]).web == "gunicorn"


def test_fifty_clients_at_once_are_all_answered(embedded_site) -> None:
    token = embedded_site.tokens["researcher"]
    results: list[int | str] = []
    lock = threading.Lock()
    start = threading.Barrier(50)

    def client(i: int) -> None:
        start.wait()
        if i % 5 == 0:
            body = json.dumps({"image": embedded_site.image, "command": ["true"], "gpu_milli": 100})
            request = urllib.request.Request(
                f"{embedded_site.url}/api/v1/jobs/",
                data=body.encode(),
                method="POST",
                headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
            )
        else:
            request = urllib.request.Request(
                f"{embedded_site.url}/api/v1/jobs/?page_size=20", headers={"Authorization": f"Token {token}"}
            )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                outcome: int | str = response.status
        except urllib.error.HTTPError as exc:
            outcome = exc.code
        except OSError as exc:  # a reset or refused connection: what runserver did to half of them
            outcome = f"{type(exc).__name__}: {exc}"
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)

    assert len(results) == 50
    assert [r for r in results if not isinstance(r, int)] == []
    assert sorted(set(results)) in ([200, 201], [200, 201, 409])
    assert "database is locked" not in embedded_site.log()

"""manage.py bench-api, run tiny on the test database: it builds jobs of every state, times each kind of
request and writes per kind as many samples as asked for, with consistent percentiles and provenance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from jobs.management.commands.bench_api import KINDS
from jobs.models import Job, Task
from tests.jobs.runtime_fixtures import image, researcher, submit, team  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture
def private_cache(settings: Any, tmp_path: Path) -> None:
    # A submit's cycle trigger sets a flag in the cache: this test's must not meet another's.
    settings.CACHES = {
        **settings.CACHES,
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": str(tmp_path)},
    }


def test_a_tiny_run_counts_every_request_per_kind_with_ordered_percentiles(
    private_cache: None, tmp_path: Path
) -> None:
    out = tmp_path / "answers.json"
    call_command("bench_api", cluster="small", jobs=20, requests=5, warmup=1, block=2, json=str(out))
    result = json.loads(out.read_text())

    assert result["config"]["job_states"] == {
        "failed": 2,
        "preempted": 1,
        "queued": 8,
        "running": 6,
        "succeeded": 3,
    }
    assert set(result["requests"]) == set(KINDS)
    for kind, measured in result["requests"].items():
        expected = {"submit": {"201": 5}}.get(kind, {"200": 5})
        assert measured["status_counts"] == expected, kind
        for clock in ("wall", "cpu"):
            summary = measured[clock]
            assert summary["count"] == 5
            assert 0 <= summary["p50_ms"] <= summary["p90_ms"] <= summary["p99_ms"] <= summary["max_ms"]
        # CPU of this process cannot exceed the wall time it was measured in, by more than rounding.
        assert measured["cpu"]["max_ms"] <= measured["wall"]["max_ms"] * 1.05 + 1
    assert {"commit", "dirty", "loadavg_1m_at_start", "loadavg_1m_at_end"} <= set(result["provenance"])
    # The 20 jobs plus one warm-up and five measured submits; the running ones hold their tasks.
    assert Job.objects.count() == 26
    assert Task.objects.filter(job__status="RUNNING").count() >= 6


def test_a_database_with_jobs_is_refused(private_cache: None, researcher, image) -> None:  # noqa: F811
    submit(researcher, image, gpus=1)
    with pytest.raises(CommandError, match=r"no jobs \(found 1\)"):
        call_command("bench_api", cluster="small", jobs=2)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"jobs": -1}, "--jobs and --warmup must be >= 0"),
        ({"requests": 0}, "--requests and --block must be >= 1"),
        ({"redis_url": "redis://127.0.0.1:6379/9"}, "--redis-url needs --database-url"),
        ({"cluster": "galaxy"}, r"'galaxy' not found \(shipped specs: .*philly-512"),
    ],
)
def test_bad_settings_are_one_line_and_write_nothing(
    options: dict[str, Any], message: str, tmp_path: Path
) -> None:
    out = tmp_path / "answers.json"
    with pytest.raises(CommandError, match=message):
        call_command("bench_api", **{"cluster": "small", "json": str(out), **options})
    assert not out.exists()


def test_a_run_whose_submits_are_refused_writes_no_latency(
    private_cache: None, settings: Any, tmp_path: Path
) -> None:
    # One write a minute per user: the second submit of a block is answered 429, which is no latency.
    settings.API_THROTTLE_RATES = {**settings.API_THROTTLE_RATES, "write": "1/minute"}
    out = tmp_path / "answers.json"
    with pytest.raises(
        CommandError, match=r"not answered as a client expects.*'submit': \{'201': \d+, '429'"
    ):
        call_command("bench_api", cluster="small", jobs=2, requests=4, warmup=0, block=2, json=str(out))
    assert not out.exists()

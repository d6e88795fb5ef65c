"""``manage.py bench_metrics`` writes its JSON and leaves no rows behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from jobs.models import Job
from observability.models import ClusterSample


def test_bench_metrics_writes_its_timings_and_rolls_its_rows_back(db, tmp_path: Path) -> None:
    out = tmp_path / "scrape.json"
    call_command("bench_metrics", "--jobs", "20,40", "--repeat", "1", "--out", str(out))
    result = json.loads(out.read_text())
    assert [row["jobs"] for row in result["scrapes"]] == [20, 40]
    assert set(result["scrapes"][0]["collector_parts_median_s"]) == {
        "_queue", "_jobs", "_start_wait", "_cluster", "_teams", "_heartbeats"
    }  # fmt: skip
    assert result["history"]["samples"] == 29 * 144 + 1440
    assert not Job.objects.exists() and not ClusterSample.objects.exists()


def test_bench_metrics_refuses_sizes_that_are_not_positive_numbers(db, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="comma-separated whole numbers"):
        call_command("bench_metrics", "--jobs", "ten", "--out", str(tmp_path / "x.json"))
    with pytest.raises(CommandError, match="positive"):
        call_command("bench_metrics", "--jobs", "0", "--out", str(tmp_path / "x.json"))

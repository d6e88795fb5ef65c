"""manage.py bench-platform, run tiny: it fills the simulated cluster, grows the waiting queue to each
count and writes one run per count with the cycle's time and its split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from jobs.models import Job
from jobs.states import JobStatus
from tests.jobs.runtime_fixtures import image, researcher, submit, team  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture
def private_cache(settings: Any, tmp_path: Path) -> None:
    # The cycle's lease and trigger flags live in the cache: this test's must not meet another's.
    settings.CACHES = {
        **settings.CACHES,
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": str(tmp_path)},
    }


def test_a_tiny_run_writes_one_run_per_waiting_count_with_the_cycle_split(
    private_cache: None, tmp_path: Path
) -> None:
    out = tmp_path / "platform.json"
    call_command(
        "bench_platform",
        cluster="small",
        jobs="2,5",
        cycles=2,
        admit_samples=1,
        submit_samples=1,
        json=str(out),
    )
    result = json.loads(out.read_text())
    assert [run["jobs"] for run in result["runs"]] == [2, 5]
    for run in result["runs"]:
        assert run["cycle_s_p99"] >= run["cycle_s_median"] > 0
        assert run["submit_s_median"] > 0
        assert set(run["split_s_median"]) == {"snapshot", "view", "plan_cycle", "persist", "other"}
        assert run["split_s_median"]["plan_cycle"] > 0 and run["split_s_median"]["snapshot"] > 0
    assert result["submit_to_admitted_s_median"] > 0
    assert result["config"]["cluster"] == "small" and result["config"]["gpus"] == 2
    # The cluster stayed full: every waiting job of the last count (the bulk copy too) still waits, with
    # its reason.
    waiting = Job.objects.filter(status=JobStatus.QUEUED.value, name__startswith="wait-")
    assert waiting.count() == 5
    assert all(job.pending_reason and job.queue_position for job in waiting)


def test_a_database_with_active_jobs_is_refused(private_cache: None, researcher, image) -> None:  # noqa: F811
    submit(researcher, image, gpus=1)
    with pytest.raises(CommandError, match=r"no active jobs \(found 1\)"):
        call_command("bench_platform", cluster="small", jobs="2")


@pytest.mark.parametrize("jobs", ["5,2", "0", "ten", ""])
def test_waiting_counts_must_be_rising_positive_numbers(jobs: str) -> None:
    with pytest.raises(CommandError, match="--jobs must be"):
        call_command("bench_platform", cluster="small", jobs=jobs)


def test_an_unknown_cluster_is_one_line_naming_the_shipped_specs(private_cache: None) -> None:
    with pytest.raises(CommandError, match=r"'galaxy' not found \(shipped specs: .*philly-512"):
        call_command("bench_platform", cluster="galaxy", jobs="2")

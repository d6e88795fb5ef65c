"""The persisted cluster history: sampling, downsampling with age (totals kept), pruning, the API."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from observability.cluster_state import ClusterState, GpuGroup, TeamState
from observability.history import history_downsample, history_points, history_record, history_sample
from observability.models import ClusterSample
from tests.jobs.runtime_fixtures import clock, image, researcher, sim, submit, team  # noqa: F401

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
REPO = Path(__file__).resolve().parents[2]


def state(
    allocated: int, *, running: int = 1, waiting: int = 0, team_milli: int | None = None
) -> ClusterState:
    stranded = 1000 - allocated % 1000 if allocated % 1000 else 0
    groups = [GpuGroup("n1", "T4", 4, 4000, allocated, stranded)]
    teams = {"vision": TeamState(allocated if team_milli is None else team_milli, running, waiting)}
    return ClusterState(groups=groups, by_team=teams)


def minute_rows(start: dt.datetime, minutes: int) -> None:
    """One sample a minute from ``start``, with values that change every minute."""
    ClusterSample.objects.bulk_create(
        ClusterSample(
            at=start + dt.timedelta(minutes=i),
            resolution_s=60,
            covered_s=60.0,
            capacity_milli=4000.0,
            allocated_milli=float((i * 37) % 4000),
            fragmentation=(i % 7) / 10,
            running=float(i % 5),
            waiting=float(i % 3),
            by_team={
                "vision": {"allocated_milli": float(i % 11) * 100, "running": float(i % 2), "waiting": 0.0}
            }
            | ({"speech": {"allocated_milli": 250.0, "running": 1.0, "waiting": 1.0}} if i % 4 == 0 else {}),
        )
        for i in range(minutes)
    )


def integrals() -> dict[str, float]:
    out: dict[str, float] = {"covered_s": 0.0}
    for row in ClusterSample.objects.all():
        out["covered_s"] += row.covered_s
        for name in ("allocated_milli", "fragmentation", "running", "waiting"):
            out[name] = out.get(name, 0.0) + getattr(row, name) * row.covered_s
        for slug, values in row.by_team.items():
            for name, value in values.items():
                out[f"{slug}.{name}"] = out.get(f"{slug}.{name}", 0.0) + value * row.covered_s
    return out


def test_downsampling_keeps_every_total_and_coarsens_rows_by_age(db) -> None:
    # 40 days of history: minute rows for the last 2 days, 10-minute rows before (as if sampled then).
    minute_rows(NOW - dt.timedelta(days=2), 2 * 1440)
    old = NOW - dt.timedelta(days=40)
    ClusterSample.objects.bulk_create(
        ClusterSample(
            at=old + dt.timedelta(minutes=10 * i), resolution_s=600, covered_s=600.0, capacity_milli=4000.0,
            allocated_milli=float(i % 9) * 400, fragmentation=0.1, running=float(i % 4), waiting=1.0,
            by_team={"vision": {"allocated_milli": float(i % 9) * 400, "running": 1.0, "waiting": 0.0}},
        )
        for i in range(38 * 144)
    )  # fmt: skip
    before = integrals()
    removed = history_downsample(now=NOW)

    after = integrals()
    assert removed > 0
    assert after.keys() == before.keys()
    for name, total in before.items():
        assert after[name] == pytest.approx(total, rel=1e-9), name
    day_ago, month_ago = NOW - dt.timedelta(days=1), NOW - dt.timedelta(days=30)
    assert not ClusterSample.objects.filter(at__lt=day_ago, resolution_s=60).exists()
    assert not ClusterSample.objects.filter(
        at__lt=month_ago - dt.timedelta(hours=1), resolution_s__lt=3600
    ).exists()
    assert ClusterSample.objects.filter(at__gte=day_ago, resolution_s=60).count() == 1440
    assert history_downsample(now=NOW) == 0  # idempotent


def test_a_merged_row_is_the_time_weighted_mean_of_the_rows_it_replaces(db) -> None:
    start = NOW - dt.timedelta(days=2)
    for minute, allocated in enumerate([1000, 3000, 2000, 0, 0, 0, 0, 0, 0, 4000]):
        history_record(
            state=state(allocated, team_milli=allocated // 2), now=start + dt.timedelta(minutes=minute)
        )
    history_downsample(now=NOW)
    (row,) = ClusterSample.objects.all()
    assert (row.at, row.resolution_s, row.covered_s) == (start, 600, 600.0)
    assert row.allocated_milli == pytest.approx(1000.0)
    assert row.by_team["vision"]["allocated_milli"] == pytest.approx(500.0)


def test_history_points_follow_the_published_shape_with_gaps_left_out(db) -> None:
    history_record(state=state(1250, waiting=2), now=NOW - dt.timedelta(minutes=30))
    history_record(state=state(1750, waiting=0), now=NOW - dt.timedelta(minutes=28))
    history_record(state=state(3000), now=NOW - dt.timedelta(minutes=2))
    data = history_points(range_name="1d", now=NOW)
    assert data["range"] == "1d" and data["step_s"] == 300
    first, second = data["points"]
    assert {k: v for k, v in first.items() if k != "fragmentation"} == {
        "t": "2026-12-01T11:30:00Z",
        "capacity_milli": 4000,
        "allocated_milli": 1500,
        "running": 1,
        "waiting": 1,
        "by_team": {"vision": {"allocated_milli": 1500, "running": 1, "waiting": 1}},
    }
    # 750 of 2750 free is stranded at 1250, 250 of 2250 at 1750: the mean of the two ratios.
    assert first["fragmentation"] == pytest.approx((750 / 2750 + 250 / 2250) / 2, abs=1e-4)
    assert second["t"] == "2026-12-01T11:55:00Z" and second["allocated_milli"] == 3000


def test_the_sampler_reads_the_backend_and_the_job_table(sim, clock, researcher, image, monkeypatch) -> None:
    from jobs import cluster, scheduling
    from jobs.binding import job_bind

    placed = submit(researcher, image, gpu_milli=250)
    submit(researcher, image, gpus=2)  # cannot fit beside the shared job: waits
    assert scheduling.run_scheduling_cycle(backend=sim).admitted == [placed.pk]
    assert job_bind(job_id=placed.pk, backend=sim) == "bound"
    monkeypatch.setattr(cluster, "get_backend", lambda name=None: sim)
    sample = history_sample(now=NOW)
    assert (sample.capacity_milli, sample.allocated_milli) == (2000.0, 250.0)
    assert sample.fragmentation == pytest.approx(750 / 1750)
    assert (sample.running, sample.waiting) == (1.0, 1.0)
    assert sample.by_team == {"vision": {"allocated_milli": 250, "running": 1, "waiting": 1}}


def test_the_history_api_needs_a_signed_in_user_and_a_known_range(db, member, api_client_for) -> None:
    client = api_client_for(member)
    assert client.get("/api/v1/cluster/history/", {"range": "7d"}).json()["step_s"] == 600
    bad = client.get("/api/v1/cluster/history/", {"range": "2w"})
    assert bad.status_code == 400 and "range" in bad.json()["extra"]["fields"]
    assert api_client_for(None).get("/api/v1/cluster/history/").status_code == 401


def test_prune_history_deletes_old_samples_and_refuses_a_bad_age(db) -> None:
    history_record(state=state(1000), now=dt.datetime.now(dt.UTC) - dt.timedelta(days=500))
    history_record(state=state(1000), now=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5))
    call_command("prune_history", "--days", "400")
    assert ClusterSample.objects.count() == 1
    with pytest.raises(CommandError, match="positive whole number"):
        call_command("prune_history", "--days", "-3")


def test_prune_history_exits_non_zero_with_one_line_on_bad_input() -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "prune_history", "--days", "soon"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert (
        done.stderr.strip().splitlines()[-1]
        == "CommandError: --days must be a positive whole number, got 'soon'"
    )

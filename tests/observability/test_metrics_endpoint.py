"""``/metrics``: the Prometheus text format, its numbers after a scripted run on the simulated
backend, and who may read it.

The scripted run uses the real cycle, bind and sync on the simulated cluster (one node, 2 T4s) with
injected time; the preemption and the migration are applied from a written decision (as in
tests/jobs/test_preemption_cycle.py), so the expected numbers below are counted by hand:

- A (1 GPU) finishes, B (1 GPU) fails with OOM;
- C and M (1 GPU each) run (a scrape then sees both GPUs allocated); E (2 GPUs, priority 10)
  preempts C (rule ``priority``) and M migrates (rule ``drain``); once both stopped, C, M and E wait
  (no further cycle: which of them the policy places next is the policy's business, tested elsewhere).

Placements: A, B, C, M = 4. Counters are per process and other tests count too, so the counted
series are compared with a scrape taken before the run; the state series are absolute.
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from jobs import cluster, scheduling
from jobs.binding import job_bind
from jobs.models import Job
from jobs.states import JobStatus
from jobs.sync import sync_status
from scheduler.model import Decision, Eviction, Migration
from tests.jobs.runtime_fixtures import clock, image, researcher, sim, submit, team  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(client: Client | None = None, **headers: Any) -> Series:
    response = (client or Client()).get("/metrics", **headers)
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/plain")
    series: Series = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            series[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return series


def value(series: Series, name: str, **labels: str) -> float:
    return series.get((name, frozenset(labels.items())), 0.0)


def matching(series: Series, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in series.items() if n == name}


def cycle(sim: Any) -> None:
    cache.delete(scheduling.round_key())
    assert scheduling.run_scheduling_cycle(backend=sim) is not None


def start(job: Job, sim: Any, clock: Any) -> None:
    assert job_bind(job_id=job.pk, backend=sim) == "bound"
    clock.advance(15)
    sync_status(backend=sim)
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING.value


@pytest.fixture
def scripted(sim, clock, researcher, image, monkeypatch) -> dict[str, Any]:  # noqa: F811
    """Runs the script; returns the scrapes before and after and the number of cycles run."""
    monkeypatch.setattr(cluster, "get_backend", lambda name=None: sim)
    before = scrape()
    cycles = 0
    a = submit(researcher, image, gpus=1, sim_duration_seconds=30)
    b = submit(researcher, image, gpus=1, sim_duration_seconds=30, env={"SIM_FAIL_CATEGORY": "OOM"})
    cycle(sim)
    cycles += 1
    for job in (a, b):
        start(job, sim, clock)
    clock.advance(40)
    sync_status(backend=sim)
    assert Job.objects.get(pk=a.pk).status == JobStatus.SUCCEEDED.value
    assert Job.objects.get(pk=b.pk).failure_category == "OOM"

    c = submit(researcher, image, gpus=1, sim_duration_seconds=100_000, preemption_grace_seconds=20)
    m = submit(researcher, image, gpus=1, sim_duration_seconds=100_000, preemption_grace_seconds=20)
    cycle(sim)
    cycles += 1
    for job in (c, m):
        start(job, sim, clock)
    running = scrape()
    e = submit(researcher, image, gpus=2, priority=10, sim_duration_seconds=100_000)
    decision = Decision(
        evictions=[Eviction(str(c.pk), "priority", str(e.pk), "priority 10 > 0")],
        migrations=[Migration(str(m.pk), (), "drain", "", "defragment")],
    )
    view = scheduling.build_view(sim, rounds=False)
    assert scheduling._apply_preemptions(sim, decision, view) == {c.pk: e.pk, m.pk: None}
    clock.advance(25)
    sync_status(backend=sim)
    assert set(Job.objects.filter(pk__in=[c.pk, m.pk]).values_list("status", flat=True)) == {"QUEUED"}
    return {
        "before": before,
        "running": running,
        "after": scrape(),
        "cycles": cycles,
        "team": researcher.memberships.first().team,
    }


def test_metrics_parse_with_the_prometheus_parser_and_follow_the_naming_rules(db) -> None:
    response = Client().get("/metrics")
    families = {f.name: f for f in text_string_to_metric_families(response.content.decode())}
    ours = {name: f for name, f in families.items() if name.startswith("gpu_platform_")}
    assert {"gpu_platform_gpu_fragmentation_ratio", "gpu_platform_heartbeat_age_seconds"} <= set(ours)
    assert "django_http_requests_latency_seconds_by_view_method" in families
    for family in ours.values():
        assert family.documentation, family.name
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples), family.name
        # No per-job series: labels come from a small fixed set.
        assert all(
            set(s.labels)
            <= {
                "team",
                "reason",
                "status",
                "failure_category",
                "size",
                "node",
                "gpu_model",
                "kind",
                "rule",
                "le",
                "model",  # the interference model in use: one series
            }
            for s in family.samples
        ), family.name


def test_counters_after_a_scripted_run_count_what_happened(scripted) -> None:
    before, after = scripted["before"], scripted["after"]

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("gpu_platform_placements_total") == 4
    assert delta("gpu_platform_preemptions_total", rule="priority") == 1
    assert delta("gpu_platform_preemptions_total", rule="drain") == 1
    assert delta("gpu_platform_migrations_total", rule="drain") == 1
    assert delta("gpu_platform_migrations_total", rule="priority") == 0
    assert delta("gpu_platform_reclaims_total") == 0
    assert delta("gpu_platform_scheduling_cycle_duration_seconds_count") == scripted["cycles"]
    assert delta("gpu_platform_scheduling_cycle_duration_seconds_sum") > 0
    finished = matching(after, "gpu_platform_jobs_finished_total")
    assert finished == {
        frozenset({"team": "vision", "status": "SUCCEEDED", "failure_category": ""}.items()): 1.0,
        frozenset({"team": "vision", "status": "FAILED", "failure_category": "OOM"}.items()): 1.0,
    }


def test_gauges_after_a_scripted_run_describe_the_cluster_and_the_queue(scripted) -> None:
    running, after = scripted["running"], scripted["after"]
    (labels,) = matching(after, "gpu_platform_gpu_capacity_milli")
    gpus = dict(labels)
    assert gpus["gpu_model"] == "T4"
    # While C and M ran: both GPUs allocated to the team, nothing stranded.
    assert value(running, "gpu_platform_gpu_allocated_milli", **gpus) == 2000
    assert value(running, "gpu_platform_gpu_idle_milli", **gpus) == 0
    assert value(running, "gpu_platform_team_gpu_allocated_milli", team="vision") == 2000
    assert value(running, "gpu_platform_jobs", status="RUNNING") == 2
    # After the preemption: C, M and E wait, the GPUs are free.
    assert value(after, "gpu_platform_gpu_capacity_milli", **gpus) == 2000
    assert value(after, "gpu_platform_gpu_allocated_milli", **gpus) == 0
    assert value(after, "gpu_platform_gpu_idle_milli", **gpus) == 2000
    assert value(after, "gpu_platform_gpu_fragmentation_ratio") == 0
    assert value(after, "gpu_platform_backend_up") == 1
    assert value(after, "gpu_platform_jobs", status="QUEUED") == 3
    assert value(after, "gpu_platform_jobs", status="RUNNING") == 0
    queue = matching(after, "gpu_platform_queue_length")
    assert sum(queue.values()) == 3 and all(dict(k)["team"] == "vision" for k in queue)
    # First starts: A, B, C, M (1 GPU each); E never started, and a restart would not count again.
    assert value(after, "gpu_platform_job_start_wait_seconds_count", team="vision", size="1") == 4
    assert value(after, "gpu_platform_job_start_wait_seconds_bucket", team="vision", size="1", le="+Inf") == 4
    assert value(after, "gpu_platform_job_start_wait_seconds_count", team="vision", size="2-4") == 0
    quota = scripted["team"].quota
    assert value(after, "gpu_platform_team_quota_max_milli", team="vision") == quota.max_gpu_milli
    assert value(after, "gpu_platform_team_gpu_hours_budget", team="vision") == quota.gpu_hours_per_month


def test_without_a_token_only_loopback_and_allowed_networks_are_served(db, settings) -> None:
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_NETWORKS = []
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 403
    assert Client(REMOTE_ADDR="::1").get("/metrics").status_code == 200
    settings.METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="::ffff:10.1.2.3").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="192.168.1.1").get("/metrics").status_code == 403


def test_with_a_token_a_request_without_it_is_refused_even_from_loopback(db, settings) -> None:
    settings.METRICS_TOKEN = "s3cret-token"
    refused = Client().get("/metrics")
    assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Bearer")
    assert b"gpu_platform" not in refused.content
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Token s3cret-token").status_code == 401
    assert scrape(Client(REMOTE_ADDR="203.0.113.9"), HTTP_AUTHORIZATION="Bearer s3cret-token")


def test_multiprocess_mode_adds_up_the_counters_of_every_process(db, tmp_path, monkeypatch) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    for count in (2, 3):
        script = f"from observability import metrics; metrics.record_placements({count})"
        subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, check=True, timeout=60)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    series = scrape()
    assert value(series, "gpu_platform_placements_total") == 5
    # The scrape-time collector still answers once, from this process.
    assert value(series, "gpu_platform_backend_up") in (0.0, 1.0)


def test_the_budget_gauges_count_this_months_grants(db, team, owner, settings) -> None:
    from quotas.models import BudgetGrant
    from quotas.services import month_key

    BudgetGrant.objects.create(
        team=team, month=month_key(), gpu_hours=250.0, granted_by=owner, reason="deadline"
    )
    series = scrape()
    assert value(series, "gpu_platform_team_gpu_hours_budget", team="vision") == 1000.0 + 250.0
    assert value(series, "gpu_platform_team_budget_used_ratio", team="vision") == 0.0


def test_the_interference_error_histogram_counts_each_measured_prediction(db) -> None:
    from jobs.models import ColocationMeasurement

    def measured(model: str, norm_a: float, predicted_a: Any, norm_b: float, predicted_b: Any) -> None:
        ColocationMeasurement.objects.create(
            image_a="a:1", command_hash_a="x", image_b="b:1", command_hash_b="y", gpu_model=model,
            share_a_milli=500, share_b_milli=500, throughput_a=1.0, throughput_b=1.0,
            solo_throughput_a=1.0, solo_throughput_b=1.0,
            norm_a=norm_a, norm_b=norm_b, predicted_a=predicted_a, predicted_b=predicted_b,
        )  # fmt: skip

    measured("T4", 0.8, 0.9, 0.5, 0.5)  # errors 0.125 and 0
    measured("T4", 0.7, None, 0.6, None)  # nothing predicted: nothing to compare
    measured("A100", 0.4, 0.2, 0.0, 0.3)  # error 0.5; a measured 0 cannot be divided by
    series = scrape()
    name = "gpu_platform_interference_prediction_error_ratio"
    assert value(series, f"{name}_count", gpu_model="T4") == 2
    assert value(series, f"{name}_sum", gpu_model="T4") == pytest.approx(0.125)
    assert value(series, f"{name}_bucket", gpu_model="T4", le="0.1") == 1
    assert value(series, f"{name}_bucket", gpu_model="T4", le="0.2") == 2
    assert value(series, f"{name}_count", gpu_model="A100") == 1
    assert value(series, f"{name}_bucket", gpu_model="A100", le="0.2") == 0
    assert value(series, f"{name}_bucket", gpu_model="A100", le="0.5") == 1


def test_the_interference_model_in_use_is_named_in_metrics(db, tmp_path: Path, monkeypatch: Any) -> None:
    from scheduler.interference.retrain import HISTORY_FILE
    from scheduler.interference.store import DEFAULT_MODEL_FILE, MODEL_DIR_ENV

    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path))
    assert matching(scrape(), "gpu_platform_interference_model_info") == {frozenset({("model", "none")}): 1.0}

    (tmp_path / DEFAULT_MODEL_FILE).write_bytes(b"trained by hand")
    assert value(scrape(), "gpu_platform_interference_model_info", model=DEFAULT_MODEL_FILE) == 1.0

    (tmp_path / HISTORY_FILE).write_text(
        '{"accepted": true, "version": "interference-v3.joblib"}\n'
        '{"accepted": false, "version": "interference-v4.joblib"}\n'
    )
    series = scrape()
    assert matching(series, "gpu_platform_interference_model_info") == {
        frozenset({("model", "interference-v3.joblib")}): 1.0
    }

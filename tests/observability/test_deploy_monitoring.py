"""deploy/grafana and deploy/prometheus: the dashboard and the rules only name metrics that /metrics
exposes, the rules pass promtool (when it is installed) and the operator's copies stay in step."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PROMETHEUS = DEPLOY / "prometheus"
DASHBOARD = DEPLOY / "grafana" / "gpu-platform.json"
PROMQL_WORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "offset",
    "bool",
}
# Series Prometheus makes itself.
BUILTIN = {"up"}
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created")}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (label matchers, grouping clauses, ranges, strings
    and function calls removed)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        token = match.group(0)
        following = expr[match.end() :].lstrip()
        if following.startswith("(") or token in PROMQL_WORDS:
            continue
        names.add(token)
    return names


@pytest.fixture
def exposed(db: Any) -> set[str]:
    """Every series name /metrics can show, also for families that have no sample yet."""
    Client().get("/api/v1/health")  # one request, so that the request metrics have samples too
    text = Client().get("/metrics").content.decode()
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ()))
        names.update(sample.name for sample in family.samples)
    return names


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def rules() -> list[dict[str, Any]]:
    return [
        rule
        for group in yaml.safe_load((PROMETHEUS / "rules.yml").read_text())["groups"]
        for rule in group["rules"]
    ]


def test_the_dashboard_covers_cluster_queue_teams_and_scheduler_health() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == ["Cluster", "Queue", "Teams", "Scheduler health"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p.get("targets") for p in dashboard["panels"] if p["type"] != "row")


def test_every_dashboard_query_names_a_metric_that_metrics_exposes(exposed: set[str]) -> None:
    used = set().union(*(metric_names(expr) for expr in dashboard_exprs()))
    assert used, "no metric found in the dashboard"
    assert used - exposed == set()


def test_every_rule_reads_exposed_metrics_or_recorded_series(exposed: set[str]) -> None:
    recorded = {r["record"] for r in rules() if "record" in r}
    for rule in rules():
        assert ("record" in rule) != ("alert" in rule)
        assert metric_names(rule["expr"]) - exposed - recorded - BUILTIN == set(), (
            rule.get("alert") or rule["record"]
        )
    alerts = {r["alert"] for r in rules() if "alert" in r}
    assert {
        "GpuPlatformSchedulerStalled",
        "GpuPlatformQueueGrowing",
        "GpuPlatformTeamBudget80Percent",
    } <= alerts


def test_the_operator_rule_copy_equals_rules_yml() -> None:
    docs = {d["kind"]: d for d in yaml.safe_load_all((PROMETHEUS / "monitors.yaml").read_text())}
    assert (
        docs["PrometheusRule"]["spec"]["groups"]
        == yaml.safe_load((PROMETHEUS / "rules.yml").read_text())["groups"]
    )
    platform = list(yaml.safe_load_all((DEPLOY / "platform.yaml").read_text()))
    service = next(
        d for d in platform if d["kind"] == "Service" and d["metadata"]["name"] == "gpu-platform-web"
    )
    monitor = docs["ServiceMonitor"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    worker = next(
        d for d in platform if d["kind"] == "Deployment" and d["metadata"]["name"] == "gpu-platform-worker"
    )
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    assert docs["PodMonitor"]["spec"]["podMetricsEndpoints"][0]["port"] in {
        p["name"] for p in container["ports"]
    }


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.skip(
            "promtool is not installed (Debian: apt-get install prometheus); the rule parsing tests above still run"
        )
    return subprocess.run(
        [binary, *args], cwd=PROMETHEUS, capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_accepts_the_rules_and_their_unit_tests_pass() -> None:
    checked = promtool("check", "rules", "rules.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "rules_test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_promtool_accepts_the_scrape_config() -> None:
    checked = promtool("check", "config", "--syntax-only", "prometheus.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr

"""Run several policies over one trace and cluster: the library behind ``python -m scheduler simulate``."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from scheduler.policy.registry import make_policy
from scheduler.sim.cluster import ClusterSpec, load_cluster_spec
from scheduler.sim.engine import SimConfig, SimResult, Simulator
from scheduler.sim.metrics import summarise
from scheduler.sim.perf import PerfModel, load_perf_model
from scheduler.sim.trace import Trace, load_trace

ProgressFactory = Callable[[str, int], Callable[[int], None]]

# Published-number context for the JSON: how the field's Python simulators compare (issue 6).
PUBLISHED_SIMULATOR_RATE = "published Python DL-cluster simulators replay 0.1-400 jobs/s"


def run_policies(
    trace: Trace,
    spec: ClusterSpec,
    perf: PerfModel,
    policies: Sequence[str],
    config: SimConfig,
    limit: int | None = None,
    progress: ProgressFactory | None = None,
    start: int = 0,
) -> tuple[dict[str, Any], dict[str, SimResult]]:
    """Simulate each policy; returns the JSON-ready report and the raw results (for plots)."""
    jobs = trace.jobs[start : start + limit] if limit else trace.jobs[start:]
    if start and jobs:
        # A slice starts on an empty cluster at time 0 like a whole trace.
        origin = jobs[0].submit
        jobs = [replace(j, submit=j.submit - origin) for j in jobs]
    report: dict[str, Any] = {
        "trace": trace.report.path,
        "trace_load": {
            "kind": trace.report.kind,
            "rows": trace.report.rows,
            "bad_rows": trace.report.bad_rows,
            "bad_row_examples": trace.report.reasons,
        },
        "jobs": len(jobs),
        "first_job": start,
        "cluster": {"name": spec.name, "total_gpus": spec.total_gpus, "gavel_gpu_type": spec.gavel_gpu_type},
        "config": {
            "seed": config.seed,
            "window": config.window,
            "scan_limit": config.scan_limit,
            "cycle_s": config.cycle_s,
            "round_s": config.round_s,
            "preempt_penalty_s": config.preempt_penalty_s,
            "slowdown_tolerance": config.slowdown_tolerance,
        },
        "policies": {},
    }
    raw: dict[str, SimResult] = {}
    for name in policies:
        policy = make_policy(name)
        callback = progress(name, len(jobs)) if progress else None
        cpu0 = time.process_time()
        result = Simulator(jobs, spec, policy, perf, config, callback).run()
        cpu = time.process_time() - cpu0
        summary = summarise(result)
        summary["cpu_s"] = round(cpu, 3)
        summary["jobs_per_cpu_s"] = round(len(jobs) / cpu, 1) if cpu > 0 else None
        summary["description"] = policy.description
        summary["profile"] = policy.profile.name
        report["policies"][name] = summary
        raw[name] = result
    report["ratios_vs_k8s"] = _ratios(report["policies"])
    report["published_context"] = PUBLISHED_SIMULATOR_RATE
    return report, raw


def _ratios(summaries: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    base = summaries.get("k8s")
    if not base:
        return {}
    out: dict[str, dict[str, float]] = {}
    for name, s in summaries.items():
        out[name] = {
            "avg_jct": s["avg_jct_s"] / base["avg_jct_s"] if base["avg_jct_s"] else float("nan"),
            "useful_util": s["useful_util"] / base["useful_util"] if base["useful_util"] else float("nan"),
            "useful_util_contended": (
                s["useful_util_contended"] / base["useful_util_contended"]
                if base["useful_util_contended"]
                else float("nan")
            ),
            "useful_util_arrivals": (
                s["useful_util_arrivals"] / base["useful_util_arrivals"]
                if base.get("useful_util_arrivals")
                else float("nan")
            ),
        }
    return out


def load_inputs(
    trace_path: Path, cluster: str, data_dir: Path, seed: int
) -> tuple[Trace, ClusterSpec, PerfModel]:
    trace = load_trace(trace_path, seed=seed)
    spec = load_cluster_spec(cluster, data_dir)
    perf = load_perf_model(data_dir / "interference" / "gavel", spec.gavel_gpu_type)
    return trace, spec, perf


MEAN_KEYS = (
    "avg_jct_s",
    "median_jct_s",
    "p95_jct_s",
    "p99_jct_s",
    "avg_queueing_s",
    "makespan_s",
    "gpu_alloc_util",
    "useful_util",
    "gpu_alloc_util_contended",
    "useful_util_contended",
    "gpu_alloc_util_arrivals",
    "useful_util_arrivals",
    "tolerance_violations",
    "preemptions",
    "migrations",
    "jobs_per_s",
    "jobs_per_cpu_s",
)


def mean_report(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Several traces on one cluster: per policy, the mean of each scalar metric over the traces
    (``policies``), the ratios of those means, and every per-trace report under ``per_trace``."""
    first = reports[0]
    policies: dict[str, dict[str, Any]] = {}
    for name in first["policies"]:
        rows = [r["policies"][name] for r in reports]
        mean = {k: sum(float(r.get(k) or 0.0) for r in rows) / len(rows) for k in MEAN_KEYS}
        policies[name] = {
            "policy": name,
            "traces": len(rows),
            "jobs": sum(r["jobs"] for r in rows),
            **mean,
            "description": rows[0]["description"],
            "profile": rows[0]["profile"],
        }
    return {
        "traces": [r["trace"] for r in reports],
        "jobs": sum(r["jobs"] for r in reports),
        "cluster": first["cluster"],
        "config": first["config"],
        "policies": policies,
        "ratios_vs_k8s": _ratios(policies),
        "per_trace": reports,
        "published_context": PUBLISHED_SIMULATOR_RATE,
    }


def merge_reports(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Reports of one trace and cluster whose policies ran in separate processes, as one report.

    Policies are independent given the seed, so this equals running them in one command."""
    first = dict(reports[0])
    for other in reports[1:]:
        if other.get("trace") != first.get("trace") or other.get("cluster") != first.get("cluster"):
            raise ValueError("reports to merge must share trace and cluster")
        if other.get("config") != first.get("config"):
            raise ValueError("reports to merge must share the simulator configuration")
    policies: dict[str, Any] = {}
    for r in reports:
        policies.update(r["policies"])
    first["policies"] = policies
    first["ratios_vs_k8s"] = _ratios(policies)
    return first

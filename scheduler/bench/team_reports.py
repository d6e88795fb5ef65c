"""The fairness and ETA benchmarks end to end: a trace slice with teams, replayed through
``scheduler.bench.team_sim``, summarised into the result files' shape (``docs/results/fairness_*.json``,
``docs/results/eta_*.json``).

A slice is ``jobs[start : start + limit]`` of the trace in submit order, shifted to start at 0 (as
``python -m scheduler simulate --start/--limit``); guarantees are computed over the slice
(``scheduler.bench.team_guarantees``).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.bench.eta_accuracy import ESTIMATORS, HEADLINE, EtaRecorder, eta_errors
from scheduler.bench.fairness_metrics import (
    jain_index,
    percentile,
    possible_service,
    reclaim_episodes,
    request_reclaim_times,
    served_fraction,
    team_jct,
)
from scheduler.bench.team_guarantees import guarantees_by_demand, team_of
from scheduler.bench.team_sim import TeamSimConfig, TeamSimResult, TeamSimulator
from scheduler.sim.cluster import ClusterSpec
from scheduler.sim.trace import TraceJob, load_trace

JCT_GOAL = 1.05  # average JCT with quotas at most 5 % above ours without


def load_slice(path: Path, start: int, limit: int | None) -> list[TraceJob]:
    jobs = load_trace(path).jobs[start : None if limit is None else start + limit]
    if not jobs:
        raise ValueError(f"{path}: no jobs in the slice start={start} limit={limit}")
    origin = jobs[0].submit
    for job in jobs:
        job.submit -= origin
    return jobs


def _rounded(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(float(x), digits)


def summarise(
    result: TeamSimResult, jobs: list[TraceJob], guarantees: dict[str, int], cpu_s: float
) -> dict[str, Any]:
    """Per-team JCT, Jain's index over served fractions, reclaim times of one replay."""
    window_end = max(j.submit for j in jobs)
    possible = possible_service(((team_of(j), j.num_gpus, j.submit, j.duration) for j in jobs), window_end)
    served = served_fraction(result.runs, {t: v for t, v in possible.items() if v > 0}, window_end)
    guarantees_milli = {t: g * 1000 for t, g in guarantees.items()}
    episodes = reclaim_episodes(result.samples, guarantees_milli)
    closed = [e.seconds for e in episodes if e.closed]
    asked = request_reclaim_times(
        result.samples,
        guarantees_milli,
        zip(
            result.teams,
            (result.num_gpus * 1000).tolist(),
            result.submit.tolist(),
            result.first_start.tolist(),
            strict=True,
        ),
    )
    return {
        "avg_jct_s": round(float((result.finish - result.submit).mean()), 1),
        "avg_wait_s": round(float((result.first_start - result.submit).mean()), 1),
        "per_team_avg_jct_s": {
            t: round(v, 1) for t, v in team_jct(result.teams, result.submit, result.finish).items()
        },
        "served_fraction": {t: round(v, 4) for t, v in sorted(served.items())},
        "jain_index": round(jain_index(list(served.values())), 4),
        "reclaim_s": {
            "median": _rounded(percentile(closed, 50), 1),
            "p99": _rounded(percentile(closed, 99), 1),
            "max": _rounded(max(closed) if closed else None, 1),
            "episodes": len(closed),
            "open_at_end": sum(not e.closed for e in episodes),
        },
        "request_reclaim_s": {
            "median": _rounded(percentile(asked, 50), 1),
            "p99": _rounded(percentile(asked, 99), 1),
            "max": _rounded(max(asked) if asked else None, 1),
            "requests": len(asked),
        },
        "preemptions": result.preemptions,
        "reclaim_evictions": result.reclaims,
        "cycles": result.cycles,
        "cpu_s": round(cpu_s, 1),
    }


def fairness_report(
    trace: Path, spec: ClusterSpec, *, policy: str, start: int, limit: int | None, config: TeamSimConfig
) -> dict[str, Any]:
    """``policy`` with quotas against ``policy`` without, on one slice; goals checked."""
    jobs = load_slice(trace, start, limit)
    runs: dict[str, dict[str, Any]] = {}
    guarantees: dict[str, int] = {}
    for quotas in (True, False):
        cfg = TeamSimConfig(**{**asdict(config), "quotas": quotas})
        cpu0 = time.process_time()
        sim = TeamSimulator(jobs, spec, policy, {}, cfg)
        guarantees = guarantees_by_demand(jobs, sim.total_gpus)
        sim.guarantees = guarantees
        result = sim.run()
        runs["quotas" if quotas else "no_quotas"] = summarise(
            result, jobs, guarantees, time.process_time() - cpu0
        )
    bound = config.cycle_s + config.grace_s
    p99 = runs["quotas"]["reclaim_s"]["p99"]
    request_p99 = runs["quotas"]["request_reclaim_s"]["p99"]
    ratio = runs["quotas"]["avg_jct_s"] / runs["no_quotas"]["avg_jct_s"]
    return {
        "trace": str(trace),
        "slice": {"start": start, "limit": limit, "jobs": len(jobs)},
        "cluster": spec.name,
        "total_gpus": sum(guarantees.values()),
        "policy": policy,
        "config": asdict(config),
        "teams": {
            t: {"jobs": sum(team_of(j) == t for j in jobs), "guarantee_gpus": g}
            for t, g in sorted(guarantees.items())
        },
        "runs": runs,
        "goals": {
            "reclaim_p99_bound_s": bound,
            "reclaim_p99_met": p99 is not None and p99 <= bound,
            # Per request (fairness_metrics): reported beside the episodes, not instead of them.
            "request_reclaim_p99_met": request_p99 is not None and request_p99 <= bound,
            "jct_ratio_quotas_over_no_quotas": round(ratio, 4),
            "jct_met": ratio <= JCT_GOAL,
        },
    }


def eta_report(
    trace: Path,
    spec: ClusterSpec,
    *,
    policy: str,
    start: int,
    limit: int | None,
    config: TeamSimConfig,
    every_s: float,
    min_wait_s: float,
    estimators: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """ETA errors of one replay with quotas per remaining-time estimator (``estimators``: names of
    ``scheduler.bench.eta_accuracy.ESTIMATORS``; default all)."""
    names = estimators or tuple(ESTIMATORS)
    jobs = load_slice(trace, start, limit)
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        recorder = EtaRecorder(every_s=every_s, estimator=name)
        cpu0 = time.process_time()
        sim = TeamSimulator(jobs, spec, policy, {}, config, observer=recorder)
        sim.guarantees = guarantees_by_demand(jobs, sim.total_gpus)
        sim.run()
        submit = {s.request.job_id: s.trace.submit for s in sim.jobs}
        first = {s.request.job_id: s.first_start for s in sim.jobs}
        found = eta_errors(recorder.estimates, submit, first, min_wait_s=min_wait_s)
        errors = np.asarray(found.errors)
        results[name] = {
            "jobs": found.jobs,
            "points": len(found.errors),
            "unknown_points": found.unknown,
            "median_rel_error": _rounded(percentile(found.errors, 50), 4),
            "p90_rel_error": _rounded(percentile(found.errors, 90), 4),
            "within_25pct": _rounded(float((errors <= 0.25).mean()) if len(errors) else None, 4),
            "refreshes": recorder.refreshes,
            "cpu_s": round(time.process_time() - cpu0, 1),
        }
    headline_name = HEADLINE if HEADLINE in results else names[0]
    headline = results[headline_name]["median_rel_error"]
    return {
        "trace": str(trace),
        "slice": {"start": start, "limit": limit, "jobs": len(jobs)},
        "cluster": spec.name,
        "policy": policy,
        "config": {**asdict(config), "refresh_every_s": every_s, "min_wait_s": min_wait_s},
        "estimators": results,
        "headline": headline_name,
        "goal": {"median_rel_error_max": 0.25, "met": headline is not None and headline <= 0.25},
    }

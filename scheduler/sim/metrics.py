"""Metrics of a simulation run (definitions as in shared/data/baselines/README.md).

- JCT = finish - submit; queueing delay = first start - submit; makespan = last finish - first submit.
- GPU allocation utilisation = time average over [0, makespan] of allocated GPUs (milli-GPU / 1000)
  / total GPUs.
- Useful-throughput utilisation = time average of ``sum(num_gpus * rate)`` / total GPUs, where a job's
  rate is its ground-truth speed relative to running alone on ideal GPUs: two tenants at 0.7 each make
  one GPU 1.4 GPUs useful; a spread 8-GPU job at rate 0.8 makes 6.4. ``*_contended`` averages only over
  the time when at least one job was waiting (what the scheduler could influence); ``*_arrivals``
  averages over the arrival window [0, last submit] (the same interval for every policy: the tail
  after the last arrival, where every policy drains what is left, is left out).
- ``tolerance_violations``: placements during which the job ran slower than 1/tolerance of its
  isolated speed at some point (co-location or communication).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.sim.engine import SimResult

CDF_POINTS = 201
TIMELINE_BINS = 400


def _time_average(t: np.ndarray, values: np.ndarray, end: float, mask: np.ndarray | None = None) -> float:
    """Piecewise-constant average: ``values[i]`` holds on ``[t[i], t[i+1])``, the last until ``end``."""
    if len(t) == 0:
        return 0.0
    widths = np.diff(np.append(t, max(end, t[-1])))
    if mask is not None:
        widths = widths * mask
    total = widths.sum()
    return float((values * widths).sum() / total) if total > 0 else 0.0


def timeline(result: SimResult, bins: int = TIMELINE_BINS) -> dict[str, list[float]]:
    """Allocation and useful utilisation averaged into ``bins`` equal time bins (for plots)."""
    end = float(np.nanmax(result.finish)) if len(result.finish) else 0.0
    if end <= 0 or len(result.t) == 0:
        return {"t": [], "alloc": [], "useful": []}
    edges = np.linspace(0.0, end, bins + 1)
    t = result.t
    # Integral of a step function up to each edge: cumulative area at change points + partial.
    widths = np.diff(np.append(t, end))
    cum_a = np.concatenate([[0.0], np.cumsum(result.alloc * widths)])
    cum_u = np.concatenate([[0.0], np.cumsum(result.useful * widths)])

    def area(cum: np.ndarray, values: np.ndarray, x: np.ndarray) -> np.ndarray:
        i = np.clip(np.searchsorted(t, x, side="right") - 1, 0, len(t) - 1)
        before = x < t[0]
        out = cum[i] + values[i] * (x - t[i])
        return np.where(before, 0.0, out)

    a_edges = area(cum_a, result.alloc, edges)
    u_edges = area(cum_u, result.useful, edges)
    dt = np.diff(edges)
    g = result.total_gpus
    return {
        "t": ((edges[:-1] + edges[1:]) / 2).round(1).tolist(),
        "alloc": (np.diff(a_edges) / dt / g).round(4).tolist(),
        "useful": (np.diff(u_edges) / dt / g).round(4).tolist(),
    }


def summarise(result: SimResult) -> dict[str, Any]:
    jct = result.finish - result.submit
    queueing = result.first_start - result.submit
    makespan = float(np.max(result.finish)) if len(jct) else 0.0
    g = result.total_gpus
    contended = (result.waiting > 0).astype(float)
    last_submit = float(np.max(result.submit)) if len(jct) else 0.0
    arrivals = (result.t < last_submit).astype(float)
    n = len(jct)
    jobs_per_s = n / result.wall_s if result.wall_s > 0 else 0.0
    qs = np.linspace(0, 100, CDF_POINTS)
    return {
        "policy": result.policy,
        "cluster": result.cluster,
        "total_gpus": g,
        "jobs": n,
        "avg_jct_s": float(jct.mean()),
        "median_jct_s": float(np.median(jct)),
        "p95_jct_s": float(np.percentile(jct, 95)),
        "p99_jct_s": float(np.percentile(jct, 99)),
        "avg_queueing_s": float(queueing.mean()),
        "makespan_s": makespan,
        "gpu_alloc_util": _time_average(result.t, result.alloc, makespan) / g,
        "useful_util": _time_average(result.t, result.useful, makespan) / g,
        "gpu_alloc_util_contended": _time_average(result.t, result.alloc, makespan, contended) / g,
        "useful_util_contended": _time_average(result.t, result.useful, makespan, contended) / g,
        "contended_fraction": _time_average(result.t, contended, makespan),
        "gpu_alloc_util_arrivals": _time_average(result.t, result.alloc, makespan, arrivals) / g,
        "useful_util_arrivals": _time_average(result.t, result.useful, makespan, arrivals) / g,
        "placements": result.placements,
        "tolerance_violations": result.violations,
        "preemptions": result.preemptions,
        "schedule_calls": result.schedule_calls,
        "unpacks_on_idle": result.unpacks_on_idle,
        "migrations": result.migrations,
        "skipped_offers": result.skipped_offers,
        "deferred_offers": result.deferred_offers,
        "wall_s": round(result.wall_s, 3),
        "jobs_per_s": round(jobs_per_s, 1),
        "jct_cdf_s": np.percentile(jct, qs).round(1).tolist(),
        "timeline": timeline(result),
    }

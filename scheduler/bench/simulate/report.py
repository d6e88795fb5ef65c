"""``python -m scheduler.bench.simulate.report docs/results/sim_*.json``: markdown tables of simulation reports."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def table(report: dict[str, Any]) -> str:
    cluster = report["cluster"]
    trace = report.get("trace") or f"{len(report.get('traces', []))} traces"
    lines = [
        f"**{Path(str(trace)).name}** on `{cluster['name']}` ({cluster['total_gpus']} GPUs), {report['jobs']} jobs",
        "",
        "| policy | avg JCT h | median h | p95 h | p99 h | avg queue h | makespan d | alloc util | useful util "
        "| useful (contended) | alloc (arrivals) | useful (arrivals) | >tolerance | preempt | migrate | jobs/CPU-s "
        "| avg JCT / k8s | useful (arrivals) / k8s |",
        "|---|" + "---|" * 17,
    ]
    ratios = report.get("ratios_vs_k8s", {})
    for name, s in report["policies"].items():
        r = ratios.get(name, {})
        lines.append(
            f"| {name} | {s['avg_jct_s'] / 3600:.2f} | {s['median_jct_s'] / 3600:.2f} | {s['p95_jct_s'] / 3600:.1f} "
            f"| {s['p99_jct_s'] / 3600:.1f} | {s['avg_queueing_s'] / 3600:.2f} | {s['makespan_s'] / 86400:.1f} "
            f"| {s['gpu_alloc_util']:.3f} | {s['useful_util']:.3f} | {s['useful_util_contended']:.3f} "
            f"| {s.get('gpu_alloc_util_arrivals', float('nan')):.3f} | {s.get('useful_util_arrivals', float('nan')):.3f} "
            f"| {s['tolerance_violations']:.0f} | {s['preemptions']:.0f} | {s.get('migrations', 0):.0f} "
            f"| {s.get('jobs_per_cpu_s') or 0:.0f} "
            f"| {r.get('avg_jct', float('nan')):.2f} | {r.get('useful_util_arrivals', float('nan')):.2f} |"
        )
    lines += ["", vs_best_other(report)]
    return "\n".join(lines)


def vs_best_other(report: dict[str, Any], ours: str = "ours") -> str:
    """One line: ours against the best other policy (lowest average JCT) of the same run."""
    policies = report["policies"]
    others = {k: v for k, v in policies.items() if k != ours}
    if ours not in policies or not others:
        return ""
    best = min(others, key=lambda k: others[k]["avg_jct_s"])
    o, b = policies[ours], others[best]
    return (
        f"ours / best other ({best}): avg JCT {o['avg_jct_s'] / b['avg_jct_s']:.2f}, "
        f"useful util {o['useful_util'] / b['useful_util']:.2f}, "
        f"useful util in contended time {o['useful_util_contended'] / b['useful_util_contended']:.2f}, "
        f"useful util over the arrival window {o.get('useful_util_arrivals', 0) / (b.get('useful_util_arrivals') or 1):.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])]
    for path in paths:
        print(table(json.loads(path.read_text())))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

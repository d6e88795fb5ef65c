"""``python -m scheduler frag``: the FGD paper's fragmentation benchmark on the Alibaba GPU trace.

Example::

    python -m scheduler frag --nodes ../shared/data/alibaba-gpu-2023/openb_node_list_gpu_node.csv \\
        --pods ../shared/data/alibaba-gpu-2023/openb_pod_list_default.csv \\
        --policy fgd --policy default --seeds 42-51 --json docs/results/frag_default.json --plot out.png

For each policy and seed it runs ``scheduler.bench.frag.experiment.run_policy`` and writes, per policy, the
mean and population sd over seeds of the paper's metrics, the scheduling rate and the wall time, and
``provenance`` (``scheduler.provenance``: code commit, interference model content hash, input files).
Without a trained interference model it says so in one stderr line and uses the analytic estimate.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any

from scheduler.bench.frag.experiment import RunResult, run_policy
from scheduler.bench.frag.metrics import MAX_BIN, mean_sd
from scheduler.commands import CommandError, model_fallback_notice
from scheduler.frag.trace import TraceError, load_nodes, load_pods
from scheduler.profiles import PROFILES, canonical_name
from scheduler.provenance import collect

METRICS = (
    "unalloc_gpu_pct_at_arrived100",
    "alloc_ratio_pct_at_arrived90",
    "alloc_ratio_pct_at_arrived100",
    "alloc_ratio_pct_at_arrived130",
    "frag_ratio_pct_at_arrived50",
    "frag_ratio_pct_at_arrived80",
    "frag_ratio_pct_at_arrived100",
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "frag",
        help="fragmentation benchmark (FGD method) on the Alibaba GPU-sharing trace",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--nodes", required=True, type=Path, help="node list CSV (openb_node_list_gpu_node.csv)"
    )
    parser.add_argument("--pods", required=True, type=Path, help="pod list CSV (openb_pod_list_*.csv)")
    parser.add_argument(
        "--policy",
        required=True,
        action="append",
        metavar="NAME",
        help=f"scheduler profile, repeatable; one of {', '.join(sorted(PROFILES))}",
    )
    parser.add_argument("--seeds", default="42-51", help="seeds: '42-51', '42,45' or '42' (default 42-51)")
    parser.add_argument("--json", required=True, type=Path, dest="json_out", metavar="OUT.json")
    parser.add_argument("--plot", type=Path, metavar="OUT.png", help="unallocated GPU vs arrived workload")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def parse_seeds(text: str) -> list[int]:
    """'42-51' -> [42..51]; '1,5,7' -> [1, 5, 7]; ranges and lists mix ('1-3,9')."""
    seeds: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if match is None or (match.group(2) is not None and int(match.group(2)) < int(match.group(1))):
            raise CommandError(f"--seeds {text!r}: expected a seed, a range like 42-51, or a comma list")
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        seeds.extend(range(lo, hi + 1))
    return seeds


def summarise(results: list[RunResult]) -> dict[str, Any]:
    """Per-policy JSON block: mean/sd per metric over seeds, rates, per-run rows and mean curves."""
    out: dict[str, Any] = {"n_seeds": len(results), "metrics": {}}
    for name in METRICS:
        values = [r.metric(name) for r in results]
        mean, sd = mean_sd(values)
        out["metrics"][name] = {
            "mean": round(mean, 3),
            "sd": round(sd, 3),
            "values": [round(v, 3) for v in values],
        }
    rates = [r.pods_offered / r.schedule_seconds for r in results if r.schedule_seconds > 0]
    rate_mean, rate_sd = mean_sd(rates)
    out["placements_per_second"] = {
        "mean": round(rate_mean, 1),
        "sd": round(rate_sd, 1),
        "median": round(sorted(rates)[len(rates) // 2], 1) if rates else None,
    }
    cpu_rates = [r.pods_offered / r.schedule_cpu_seconds for r in results if r.schedule_cpu_seconds > 0]
    cpu_mean, cpu_sd = mean_sd(cpu_rates)
    out["placements_per_cpu_second"] = {"mean": round(cpu_mean, 1), "sd": round(cpu_sd, 1)}
    out["wall_seconds"] = round(sum(r.wall_seconds for r in results), 2)
    out["runs"] = [
        {
            "seed": r.seed,
            "pods_offered": r.pods_offered,
            "pods_placed": r.pods_placed,
            "schedule_seconds": round(r.schedule_seconds, 3),
            "wall_seconds": round(r.wall_seconds, 3),
            **{m: round(r.metric(m), 3) for m in METRICS},
        }
        for r in results
    ]
    out["curves"] = {
        "arrived_pct": list(range(MAX_BIN + 1)),
        "alloc_pct_mean": _mean_curve([r.alloc_pct for r in results]),
        "frag_ratio_pct_mean": _mean_curve([r.frag_ratio_pct for r in results]),
        "frag_amount_pct_mean": _mean_curve([r.frag_amount_pct for r in results]),
    }
    return out


def _mean_curve(curves: list[list[float | None]]) -> list[float | None]:
    out: list[float | None] = []
    for values in zip(*curves, strict=True):
        present = [v for v in values if v is not None]
        out.append(round(sum(present) / len(present), 3) if present else None)
    return out


def _nan_to_none(value: Any) -> Any:
    """JSON has no NaN: a metric at an arrived % the run never reached becomes null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, block in report["policies"].items():
        xs = block["curves"]["arrived_pct"]
        alloc = block["curves"]["alloc_pct_mean"]
        frag = block["curves"]["frag_ratio_pct_mean"]
        mean = block["metrics"]["unalloc_gpu_pct_at_arrived100"]["mean"]
        un = [(x, 100.0 - a) for x, a in zip(xs, alloc, strict=True) if a is not None and x >= 60]
        ax1.plot([p[0] for p in un], [p[1] for p in un], label=f"{name} ({mean:.2f}% @100)")
        fr = [(x, f) for x, f in zip(xs, frag, strict=True) if f is not None]
        ax2.plot([p[0] for p in fr], [p[1] for p in fr], label=name)
    ax1.axvline(100, color="grey", lw=0.5)
    ax1.set_xlabel("arrived workload (% of cluster GPUs)")
    ax1.set_ylabel("unallocated GPU (%)")
    ax1.set_title(f"{Path(report['pods']).stem}: unallocated GPUs")
    ax1.legend(fontsize=7)
    ax2.set_xlabel("arrived workload (% of cluster GPUs)")
    ax2.set_ylabel("fragmentation ratio (% of idle GPU)")
    ax2.set_title("fragmentation against the target workload")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    policies: list[str] = []
    for name in args.policy:
        canon = canonical_name(name)
        if canon not in PROFILES:
            raise CommandError(f"unknown policy {name!r}; known: {', '.join(sorted(PROFILES))}")
        if canon not in policies:
            policies.append(canon)
    seeds = parse_seeds(args.seeds)
    try:
        nodes = load_nodes(args.nodes)
        pods = load_pods(args.pods)
    except TraceError as exc:
        raise CommandError(str(exc)) from None
    if not any(n.gpus for n in nodes):
        raise CommandError(f"{args.nodes}: the cluster has no GPUs")
    for target in (args.json_out, args.plot):
        if target is not None and not target.parent.exists():
            raise CommandError(f"{target.parent}: no such directory")

    from tqdm import tqdm

    started = time.perf_counter()
    per_run = max(len(pods), 1) * 1.3
    report: dict[str, Any] = {
        "benchmark": "frag",
        "method": "FGD (ATC'23) fill-the-cluster: shuffle by seed, inflate to 130% of GPU capacity, "
        "place one by one, failures final; metrics binned on arrived %",
        "nodes": str(args.nodes),
        "pods": str(args.pods),
        "n_nodes": len(nodes),
        "n_gpus": sum(len(n.gpus) for n in nodes),
        "n_pods": len(pods),
        "seeds": seeds,
        "policies": {},
    }
    with (
        model_fallback_notice("frag"),
        tqdm(
            total=int(per_run * len(seeds) * len(policies)),
            unit="pod",
            disable=args.quiet or None,
            file=sys.stderr,
            mininterval=1.0,
            desc="frag",
        ) as bar,
    ):
        for policy in policies:
            results = []
            for seed in seeds:
                bar.set_postfix_str(f"{policy} seed {seed}")
                results.append(run_policy(nodes, pods, policy, seed, on_progress=bar.update))
            report["policies"][policy] = summarise(results)
        report["provenance"] = collect([args.nodes, args.pods])
    report["wall_seconds"] = round(time.perf_counter() - started, 2)
    try:
        args.json_out.write_text(json.dumps(_nan_to_none(report), indent=1, allow_nan=False) + "\n")
        if args.plot is not None:
            plot(report, args.plot)
    except OSError as exc:
        raise CommandError(f"cannot write results: {exc.strerror}: {exc.filename}") from None
    except ValueError as exc:
        raise CommandError(f"cannot write results: {exc}") from None
    for policy, block in report["policies"].items():
        m = block["metrics"]["unalloc_gpu_pct_at_arrived100"]
        rate = block["placements_per_second"]["mean"]
        print(
            f"{policy:16s} unallocated GPU @100% arrived {m['mean']:6.2f} ± {m['sd']:.2f} %   "
            f"{rate:8.0f} placements/s"
        )
    if any(math.isnan(b["metrics"][m]["mean"]) for b in report["policies"].values() for m in METRICS):
        print("note: some metrics are NaN (the workload never reached that arrived %)", file=sys.stderr)
    return 0

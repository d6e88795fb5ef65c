"""Markdown tables of ``frag`` results beside the FGD paper's published means.

``python -m scheduler.bench.frag.report RESULTS.json... [--reference summary_by_workload_policy.csv]``
prints, per workload, unallocated GPU % at arrived 100 % (mean ± sd over seeds) per policy, and the
published mean where the reference summary has one.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

from scheduler.datapaths import default_data_dir

# Reference ``sc_policy`` -> our profile names.
REFERENCE_NAMES = {
    "01-Random": "random",
    "02-DotProd": "dot_product",
    "03-GpuClustering": "gpu_clustering",
    "04-GpuPacking": "gpu_packing",
    "05-BestFit": "best_fit",
    "06-FGD": "fgd",
}
ORDER = [
    "random",
    "dot_product",
    "gpu_clustering",
    "gpu_packing",
    "best_fit",
    "fgd",
    "k8s_default",
    "default",
]
METRIC = "unalloc_gpu_pct_at_arrived100"


def load_reference(path: Path, metric: str = METRIC) -> dict[tuple[str, str], tuple[float, float]]:
    """(workload, policy) -> (mean, sd) from the reference summary CSV."""
    out: dict[tuple[str, str], tuple[float, float]] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            policy = REFERENCE_NAMES.get(row["sc_policy"])
            if policy:
                workload = row["workload"].removeprefix("openb_pod_list_")
                out[(workload, policy)] = (float(row[f"{metric}_mean"]), float(row[f"{metric}_sd"]))
    return out


def load_results(paths: list[Path], metric: str = METRIC) -> dict[str, dict[str, tuple[float, float, int]]]:
    """workload -> policy -> (mean, sd, seeds); later files override earlier ones."""
    out: dict[str, dict[str, tuple[float, float, int]]] = defaultdict(dict)
    for path in paths:
        report = json.loads(path.read_text())
        workload = Path(report["pods"]).stem.removeprefix("openb_pod_list_")
        for policy, block in report["policies"].items():
            m = block["metrics"][metric]
            if m["mean"] is not None:
                out[workload][policy] = (m["mean"], m["sd"], block["n_seeds"])
    return out


def table(
    results: dict[str, dict[str, tuple[float, float, int]]],
    reference: dict[tuple[str, str], tuple[float, float]],
) -> str:
    policies = [p for p in ORDER if any(p in r for r in results.values())]
    head = "| workload | " + " | ".join(policies) + " | default / FGD (published) |"
    lines = [head, "|" + "---|" * (len(policies) + 2)]
    for workload in sorted(results, key=_workload_order):
        cells = []
        for p in policies:
            got = results[workload].get(p)
            ref = reference.get((workload, p))
            cell = f"{got[0]:.2f} ± {got[1]:.2f}" if got else "–"
            if ref:
                cell += f" ({ref[0]:.2f})"
            cells.append(cell)
        ours = results[workload].get("default")
        fgd = reference.get((workload, "fgd"))
        ratio = f"{ours[0] / fgd[0]:.2f}x" if ours and fgd else "–"
        lines.append(f"| {workload} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines)


def plot_bars(
    results: dict[str, dict[str, tuple[float, float, int]]],
    reference: dict[tuple[str, str], tuple[float, float]],
    path: Path,
    policies: tuple[str, ...] = ("best_fit", "fgd", "default"),
) -> None:
    """Grouped bars: unallocated GPU % at arrived 100 % per workload, ours and FGD's published mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = sorted(results, key=_workload_order)
    series: list[tuple[str, list[float], list[float]]] = []
    for p in policies:
        means = [results[w].get(p, (float("nan"), 0.0, 0))[0] for w in workloads]
        sds = [results[w].get(p, (0.0, 0.0, 0))[1] for w in workloads]
        series.append((p, means, sds))
    series.append(
        (
            "fgd (published)",
            [reference.get((w, "fgd"), (float("nan"), 0.0))[0] for w in workloads],
            [reference.get((w, "fgd"), (0.0, 0.0))[1] for w in workloads],
        )
    )
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(13, 4.5))
    for i, (label, means, sds) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(workloads))]
        ax.bar(xs, means, width, yerr=sds, label=label, capsize=2)
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels(workloads, rotation=30, ha="right")
    ax.set_ylabel("unallocated GPU (%) at arrived 100 %")
    ax.set_title("Alibaba GPU-sharing trace, 1,213 nodes / 6,212 GPUs (lower is better)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _workload_order(name: str) -> tuple[int, str]:
    families = ["default", "cpu", "gpushare", "gpuspec", "multigpu"]
    return (next((i for i, f in enumerate(families) if name.startswith(f)), 9), name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument(
        "--reference",
        type=Path,
        default=default_data_dir() / "alibaba-gpu-2023/fgd-reference-results/summary_by_workload_policy.csv",
    )
    parser.add_argument("--metric", default=METRIC)
    parser.add_argument("--plot", type=Path, help="grouped bar chart (PNG) of the metric per workload")
    args = parser.parse_args(argv)
    reference = load_reference(args.reference, args.metric) if args.reference.is_file() else {}
    results = load_results(args.results, args.metric)
    print(table(results, reference))
    if args.plot is not None:
        plot_bars(results, reference, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())

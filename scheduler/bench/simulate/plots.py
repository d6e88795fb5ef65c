"""Plots of a simulation report: JCT CDF per policy and utilisation over time per policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_report(report: dict[str, Any], out: Path) -> None:
    """Left: CDF of job completion time (log x). Right: useful (solid) and allocated (dotted) GPUs."""
    policies: dict[str, dict[str, Any]] = report["policies"]
    fig, (ax_cdf, ax_util) = plt.subplots(1, 2, figsize=(13, 4.8))
    for name, s in policies.items():
        cdf = np.asarray(s["jct_cdf_s"], dtype=float)
        ys = np.linspace(0, 1, len(cdf))
        (line,) = ax_cdf.plot(
            np.maximum(cdf, 1.0) / 3600.0, ys, label=f"{name} (avg {s['avg_jct_s'] / 3600:.1f} h)"
        )
        tl = s["timeline"]
        if tl["t"]:
            t_days = np.asarray(tl["t"]) / 86400.0
            ax_util.plot(t_days, tl["useful"], color=line.get_color(), lw=1.0, label=name)
            ax_util.plot(t_days, tl["alloc"], color=line.get_color(), lw=0.6, ls=":")
    ax_cdf.set_xscale("log")
    ax_cdf.set_xlabel("job completion time (h)")
    ax_cdf.set_ylabel("fraction of jobs")
    ax_cdf.set_title("JCT CDF")
    ax_cdf.legend(fontsize=8)
    ax_cdf.grid(alpha=0.3)
    ax_util.set_xlabel("time (days)")
    ax_util.set_ylabel("fraction of GPUs")
    ax_util.set_title("useful throughput (solid) and allocation (dotted)")
    ax_util.legend(fontsize=8)
    ax_util.grid(alpha=0.3)
    cluster = report["cluster"]
    fig.suptitle(
        f"{Path(report['trace']).name} on {cluster['name']} ({cluster['total_gpus']} GPUs), {report['jobs']} jobs"
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)

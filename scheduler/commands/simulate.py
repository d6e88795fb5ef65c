"""``python -m scheduler simulate``: replay a job trace through ``schedule()`` under several policies.

Example::

    python -m scheduler simulate --trace ../shared/data/traces/philly/philly_jobs_2017-09-04_to_2017-11-30.csv \\
        --cluster philly-512 --policy k8s --policy tiresias --policy ours --seed 0 \\
        --json docs/results/sim_philly.json --plot docs/results/sim_philly.png

``--cluster`` is a spec file or the name of a shipped spec (scheduler/sim/clusters/). Policies:
k8s, fifo, sjf, tiresias, gandiva, gpushare, ours (see scheduler/policy/). Bad trace rows are
reported and skipped with a count; a missing file or unknown policy is one line and exit code 2.

The JSON records ``provenance`` (``scheduler.provenance``): code commit, the interference model
loaded (content hash) and the data files read. Without a trained model the run says so in one line
on stderr and uses the analytic estimate (``make models`` trains it).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scheduler.commands import CommandError, model_fallback_notice
from scheduler.datapaths import default_data_dir
from scheduler.policy import POLICY_NAMES
from scheduler.provenance import collect
from scheduler.sim.cluster import SPEC_DIR, ClusterSpec, ClusterSpecError
from scheduler.sim.engine import SimConfig
from scheduler.sim.trace import TraceError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="trace-driven cluster simulation: JCT and utilisation per policy",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--trace", required=True, type=Path, action="append",
        help="Philly, ITP or Sia/Pollux trace CSV; repeat to run several (JSON adds the mean over them)",
    )  # fmt: skip
    parser.add_argument("--cluster", required=True, help="cluster spec YAML, or a shipped spec name")
    parser.add_argument(
        "--policy",
        required=True,
        action="append",
        metavar="NAME",
        help=f"repeatable; one of {', '.join(POLICY_NAMES)}",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the job-type draw (default 0)")
    parser.add_argument("--json", required=True, type=Path, dest="json_out", metavar="OUT.json")
    parser.add_argument("--plot", type=Path, metavar="OUT.png", help="JCT CDF and utilisation over time")
    parser.add_argument("--data", type=Path, default=None, help="shared data folder (default ../shared/data)")
    parser.add_argument("--limit", type=int, default=None, help="replay only N jobs")
    parser.add_argument(
        "--start", type=int, default=0, help="skip the first N jobs (a slice starts at time 0)"
    )
    parser.add_argument("--window", type=int, default=SimConfig.window, help="jobs offered per cycle")
    parser.add_argument("--cycle-seconds", type=float, default=SimConfig.cycle_s, help="scheduling beat")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def _progress(quiet: bool) -> Callable[[str, int], Callable[[int], None]] | None:
    if quiet:
        return None
    from tqdm import tqdm

    def factory(name: str, total: int) -> Callable[[int], None]:
        bar = tqdm(total=total, desc=name, unit="job", mininterval=0.5, file=sys.stderr, leave=True)
        step = max(1, total // 200)
        state = {"shown": 0}

        def update(done: int) -> None:
            if done - state["shown"] >= step or done == total:
                bar.update(done - state["shown"])
                state["shown"] = done
                if done == total:
                    bar.close()

        return update

    return factory


def _input_files(cluster: str, spec: ClusterSpec, data_dir: Path) -> list[Path]:
    """The files besides the trace that ``load_inputs`` reads, resolved as it resolves them."""
    spec_file = Path(cluster) if Path(cluster).is_file() else SPEC_DIR / f"{cluster}.yaml"
    gavel = data_dir / "interference" / "gavel"
    files = [spec_file, gavel / "gavel_isolated_throughputs.csv", gavel / "gavel_pairs_single_gpu.csv"]
    for group in spec.groups:
        if group.topology:
            topo = Path(group.topology)
            files.append(topo if topo.is_absolute() else data_dir / "topologies" / topo)
    return files


def run(args: argparse.Namespace) -> int:
    from scheduler.bench.simulate.plots import plot_report
    from scheduler.sim.runner import load_inputs, mean_report, run_policies

    unknown = [p for p in args.policy if p not in POLICY_NAMES]
    if unknown:
        raise CommandError(f"unknown policy {unknown[0]!r}; known: {', '.join(POLICY_NAMES)}")
    if (args.limit is not None and args.limit <= 0) or args.start < 0:
        raise CommandError("--limit must be positive and --start not negative")
    if args.window <= 0 or args.cycle_seconds < 0:
        raise CommandError("--window must be positive and --cycle-seconds not negative")
    data_dir = args.data or default_data_dir()
    config = SimConfig(seed=args.seed, window=args.window, cycle_s=args.cycle_seconds)
    reports = []
    used: list[Path] = []
    with model_fallback_notice("simulate"):
        for path in args.trace:
            try:
                trace, spec, perf = load_inputs(path, args.cluster, data_dir, args.seed)
            except (TraceError, ClusterSpecError, FileNotFoundError, ValueError) as exc:
                raise CommandError(str(exc)) from None
            print(trace.report.summary(), file=sys.stderr)
            used += [path, *_input_files(args.cluster, spec, data_dir)]
            try:
                one, _ = run_policies(
                    trace,
                    spec,
                    perf,
                    args.policy,
                    config,
                    args.limit,
                    _progress(args.quiet),
                    start=args.start,
                )
            except ValueError as exc:
                raise CommandError(f"{path}: {exc}") from None
            reports.append(one)
        report = reports[0] if len(reports) == 1 else mean_report(reports)
        report["provenance"] = collect(used)
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(report, indent=1, default=float) + "\n")
    if args.plot:
        plot_report(reports[0], args.plot)
    for name, s in report["policies"].items():  # means over the traces when several
        print(
            f"{name:9s} avg JCT {s['avg_jct_s'] / 3600:8.2f} h  p99 {s['p99_jct_s'] / 3600:8.1f} h  "
            f"queue {s['avg_queueing_s'] / 3600:7.2f} h  useful {s['useful_util']:.3f}  "
            f"alloc {s['gpu_alloc_util']:.3f}  {s['jobs_per_s']:.0f} jobs/s"
        )
    return 0

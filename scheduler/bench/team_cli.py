"""Arguments the team benchmarks (``python -m scheduler fairness`` and ``eta-accuracy``) share."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from scheduler.commands import CommandError
from scheduler.datapaths import default_data_dir
from scheduler.policy import POLICY_NAMES
from scheduler.provenance import collect
from scheduler.sim.cluster import ClusterSpec, ClusterSpecError, load_cluster_spec
from scheduler.sim.trace import TraceError, load_trace


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace", required=True, type=Path, help="Philly or ITP trace CSV (with a team column)"
    )
    parser.add_argument("--cluster", required=True, help="cluster spec YAML, or a shipped spec name")
    parser.add_argument("--policy", default="ours", choices=POLICY_NAMES, help="default ours")
    parser.add_argument("--start", type=int, default=0, help="first job of the slice (submit order)")
    parser.add_argument("--limit", type=int, default=1000, help="jobs in the slice (default 1000)")
    parser.add_argument("--cycle-s", type=float, default=10.0, help="scheduling beat (default 10 s)")
    parser.add_argument("--grace-s", type=float, default=30.0, help="victims' grace period (default 30 s)")
    parser.add_argument("--json", required=True, type=Path, dest="json_out", metavar="OUT.json")
    parser.add_argument("--data", type=Path, default=None, help="shared data folder (default ../shared/data)")


def replay_inputs(args: argparse.Namespace) -> ClusterSpec:
    """The cluster spec, after checking the arguments (one-line errors)."""
    if args.start < 0 or args.limit <= 0:
        raise CommandError("--start must be >= 0 and --limit > 0")
    if args.cycle_s <= 0 or args.grace_s < 0:
        raise CommandError("--cycle-s must be > 0 and --grace-s >= 0")
    try:
        trace = load_trace(args.trace)
        spec = load_cluster_spec(args.cluster, args.data or default_data_dir())
    except (TraceError, ClusterSpecError) as exc:
        raise CommandError(str(exc)) from None
    if not any(j.team for j in trace.jobs):
        raise CommandError(
            f"{args.trace}: the trace names no teams (Philly's cluster column, ITP's model_name)"
        )
    return spec


def write_report(args: argparse.Namespace, report: dict[str, Any]) -> None:
    report["provenance"] = collect([args.trace])
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(report, indent=2) + "\n")

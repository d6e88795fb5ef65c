"""``python -m scheduler.bench.simulate.merge OUT.json IN.json [IN.json ...] [--plot OUT.png]``: one
report from ``python -m scheduler simulate`` runs of the same trace and cluster whose policies ran in
separate processes (in parallel)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scheduler.bench.simulate.plots import plot_report
from scheduler.sim.runner import merge_reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler.bench.simulate.merge", description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("inputs", type=Path, nargs="+")
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args(argv)
    try:
        report = merge_reports([json.loads(p.read_text()) for p in args.inputs])
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(report, indent=1, default=float) + "\n")
    if args.plot:
        plot_report(report, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())

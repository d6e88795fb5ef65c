"""``python -m scheduler fairness``: team quotas measured on a trace slice (issue 17, item 6).

The slice is replayed through ``plan_cycle`` (``scheduler.bench.team_sim``) twice, with team quotas
(guarantees in proportion to demand, borrowing, reclaim) and without, and the JSON reports per-team
average JCT, Jain's index over the teams' served fractions, the reclaim time (median, p99) and the
goals: p99 reclaim time at most one cycle plus the grace period, average JCT at most 5 % above the
run without quotas. Example::

    python -m scheduler fairness --trace ../shared/data/traces/philly/philly_jobs_2017-09-04_to_2017-11-30.csv \\
        --cluster philly-256 --start 40000 --limit 1500 --json docs/results/fairness_philly.json
"""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.bench.team_cli import add_replay_arguments, replay_inputs, write_report
from scheduler.bench.team_reports import fairness_report
from scheduler.bench.team_sim import ReplayStalled, TeamSimConfig
from scheduler.commands import CommandError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "fairness",
        help="team quotas on a trace slice: per-team JCT, Jain's index, reclaim time",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_replay_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    spec = replay_inputs(args)
    config = TeamSimConfig(cycle_s=args.cycle_s, grace_s=args.grace_s)
    try:
        report = fairness_report(
            args.trace, spec, policy=args.policy, start=args.start, limit=args.limit, config=config
        )
    except ReplayStalled as exc:
        raise CommandError(str(exc)) from None
    write_report(args, report)
    goals = report["goals"]
    print(
        f"reclaim p99 {report['runs']['quotas']['reclaim_s']['p99']} s (bound {goals['reclaim_p99_bound_s']} s), "
        f"JCT ratio {goals['jct_ratio_quotas_over_no_quotas']}, Jain {report['runs']['quotas']['jain_index']} "
        f"-> {args.json_out}"
    )
    return 0

"""``python -m scheduler eta-accuracy``: how far the queue's ETAs are from the actual starts
(issue 17, item 5).

The slice is replayed with team quotas through ``plan_cycle`` (``scheduler.bench.team_sim``); the
waiting jobs' ETAs come from ``scheduler.policy.eta.estimate_starts`` (the platform's estimate),
made when a job enters the queue and at least every ``--every-s``. The JSON reports the median and
p90 of ``|ETA - actual start| / actual wait`` at every tenth of each job's wait, for each
remaining-time estimator (``--estimators``: the running jobs' ends dated together as order
statistics, the headline; each job's own conditional median, the platform's; the plain median;
``scheduler.bench.eta_accuracy``). Example::

    python -m scheduler eta-accuracy --trace ../shared/data/traces/philly/philly_jobs_2017-09-04_to_2017-11-30.csv \\
        --cluster philly-256 --start 40000 --limit 1500 --json docs/results/eta_philly.json
"""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.bench.eta_accuracy import ESTIMATORS, HEADLINE
from scheduler.bench.team_cli import add_replay_arguments, replay_inputs, write_report
from scheduler.bench.team_reports import eta_report
from scheduler.bench.team_sim import ReplayStalled, TeamSimConfig
from scheduler.commands import CommandError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "eta-accuracy",
        help="queue ETAs against actual starts on a trace slice with teams",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_replay_arguments(parser)
    parser.add_argument(
        "--every-s", type=float, default=360.0, help="refresh interval (default 360 s, a round)"
    )
    parser.add_argument(
        "--min-wait-s", type=float, default=60.0, help="jobs that waited less are left out (default 60)"
    )
    parser.add_argument(
        "--estimators",
        nargs="+",
        choices=list(ESTIMATORS),
        default=list(ESTIMATORS),
        help="remaining-time estimators to compare, one replay each (default all; the first listed of "
        f"ESTIMATORS, {HEADLINE}, is the headline)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    spec = replay_inputs(args)
    if args.every_s <= 0 or args.min_wait_s <= 0:
        raise CommandError("--every-s and --min-wait-s must be > 0")
    config = TeamSimConfig(cycle_s=args.cycle_s, grace_s=args.grace_s)
    try:
        report = eta_report(
            args.trace, spec, policy=args.policy, start=args.start, limit=args.limit, config=config,
            every_s=args.every_s, min_wait_s=args.min_wait_s, estimators=tuple(args.estimators),
        )  # fmt: skip
    except ReplayStalled as exc:
        raise CommandError(str(exc)) from None
    write_report(args, report)
    best = report["estimators"][report["headline"]]
    print(f"ETA error median {best['median_rel_error']}, p90 {best['p90_rel_error']} -> {args.json_out}")
    return 0

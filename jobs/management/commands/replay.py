"""``manage.py replay``: drive the platform through a job trace on a virtual clock (see jobs.replay).

Example::

    python manage.py replay --trace ../shared/data/traces/philly/philly_jobs_2017-09-04_to_2017-11-30.csv \
        --cluster philly-256 --policy ours --start 10000 --limit 400 --seed 0 --json /tmp/replay.json

Runs in a temporary database made for the run (SQLite in memory with the default settings; a
``test_*`` database on PostgreSQL) and dropped afterwards; ``--use-configured-db`` writes into the
configured database instead. ``--compare`` also runs ``python -m scheduler simulate``'s simulator on
the same slice, cluster, seed and policy, and writes both side by side with their ratios. Bad input is
one line on stderr and exit code 2.

Teams and ETAs (issue 17, the replay half of ``python -m scheduler eta-accuracy``)::

    python manage.py replay --trace ... --cluster philly-256 --policy ours --start N --limit N \
        --teams vc --whole-gpus --grace-seconds 30 --json /tmp/replay.json \
        --eta-json docs/results/eta_replay_philly.json

``--teams vc``: a team per trace team (Philly's virtual cluster) with guarantees in proportion to
demand (``jobs.replay_teams``); ``--whole-gpus``: whole-GPU requests, as the simulator's team replay;
``--eta-json``: the platform's queue ETAs scored against the actual starts (``jobs.replay_eta``).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from jobs.replay import ReplayConfig, ReplayError, ReplayOutcome, run_replay, sim_config
from jobs.replay_eta import ENTRY, MIN_WAIT_S, ROUND, score
from jobs.replay_teams import TEAM_MODES
from scheduler.bench.team_guarantees import team_of
from scheduler.datapaths import default_data_dir
from scheduler.provenance import collect

COMPARED = (
    "avg_jct_s",
    "p99_jct_s",
    "median_jct_s",
    "avg_queueing_s",
    "makespan_s",
    "preemptions",
    "migrations",
)


def _git_commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out + ("-dirty" if dirty else "")


def simulate(config: ReplayConfig) -> dict[str, Any]:
    """The simulator's summary for the replay's slice, cluster, seed and policy."""
    from scheduler.sim.runner import load_inputs, run_policies

    trace, spec, perf = load_inputs(config.trace, config.cluster, config.data_dir, config.seed)
    report, _ = run_policies(
        trace, spec, perf, [config.policy], sim_config(config), limit=config.limit, start=config.start
    )
    summary: dict[str, Any] = report["policies"][config.policy]
    return summary


def command_line(opts: dict[str, Any]) -> str:
    """The command that reproduces this run (the options given, in a fixed order)."""
    words = ["python", "manage.py", "replay", "--trace", str(opts["trace"]), "--cluster", opts["cluster"]]
    words += ["--policy", opts["policy"], "--start", str(opts["start"])]
    if opts["limit"] is not None:
        words += ["--limit", str(opts["limit"])]
    words += ["--seed", str(opts["seed"]), "--grace-seconds", f"{opts['grace_seconds']:g}"]
    if opts["teams"] is not None:
        words += ["--teams", opts["teams"]]
    if opts["whole_gpus"]:
        words.append("--whole-gpus")
    words += ["--min-wait-s", f"{opts['min_wait_s']:g}", "--json", opts["json"]]
    if opts["eta_json"] is not None:
        words += ["--eta-json", opts["eta_json"]]
    return " ".join(words)


def eta_summary(outcome: ReplayOutcome, *, min_wait_s: float) -> dict[str, Any]:
    """The ETA errors of a replay run with ``config.eta``: on every estimate the platform made, and on
    its rounds' alone (what the API shows without the entry estimates; jobs.replay_eta)."""
    log = outcome.eta_log
    assert log is not None, "the replay did not record ETAs (config.eta)"
    args = (log, outcome.job_ids, outcome.submit, outcome.first_start)
    return {
        "estimates": {
            "entry_and_rounds": score(*args, min_wait_s=min_wait_s, kinds=(ENTRY, ROUND)),
            "rounds_only": score(*args, min_wait_s=min_wait_s, kinds=(ROUND,)),
        },
        "refreshes": dict(log.refreshes),
    }


class Command(BaseCommand):
    help = (
        "Replay a job trace through the platform (services, database, cycle, bind, sync, simulated backend)."
    )
    # The replay brings its own backend (simulated, on the trace's cluster) and policy: the checks of
    # the configured backend (a local job user, a kubeconfig) do not apply to it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--trace", required=True, help="Philly, ITP or Sia/Pollux trace CSV")
        parser.add_argument("--cluster", required=True, help="simulator cluster spec name or YAML file")
        parser.add_argument(
            "--policy", required=True, help="k8s, fifo, sjf, tiresias, gandiva, gpushare, ours"
        )
        parser.add_argument("--limit", type=int, default=None, help="replay only N jobs")
        parser.add_argument(
            "--start", type=int, default=0, help="skip the first N jobs (a slice starts at 0)"
        )
        parser.add_argument("--seed", type=int, default=0, help="seed of the job-type draw (default 0)")
        parser.add_argument("--json", required=True, metavar="OUT.json")
        parser.add_argument(
            "--data", type=Path, default=None, help="shared data folder (default ../shared/data)"
        )
        parser.add_argument("--grace-seconds", type=float, default=0.0, help="preemption grace (default 0)")
        parser.add_argument("--compare", action="store_true", help="also run the simulator; write both")
        parser.add_argument(
            "--teams",
            choices=TEAM_MODES,
            default=None,
            help="vc: a team per trace team, guarantees in proportion to demand (default: one team)",
        )
        parser.add_argument(
            "--whole-gpus", action="store_true", help="whole GPUs for every job (no shared requests)"
        )
        parser.add_argument(
            "--eta-json",
            default=None,
            metavar="OUT.json",
            help="record the platform's queue ETAs and write their errors against the actual starts",
        )
        parser.add_argument(
            "--min-wait-s",
            type=float,
            default=MIN_WAIT_S,
            help="ETA scoring: jobs that waited less are left out",
        )
        parser.add_argument("--use-configured-db", action="store_true", help="write into the configured DB")
        parser.add_argument("--quiet", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["limit"] is not None and opts["limit"] <= 0:
            raise CommandError("--limit must be a positive integer", returncode=2)
        if opts["start"] < 0:
            raise CommandError("--start must be >= 0", returncode=2)
        if opts["grace_seconds"] < 0:
            raise CommandError("--grace-seconds must be >= 0", returncode=2)
        if opts["min_wait_s"] <= 0:
            raise CommandError("--min-wait-s must be > 0", returncode=2)
        data = opts["data"] or default_data_dir()
        quiet = opts["quiet"]
        # One line per submitted and admitted job is noise here (thousands of them).
        for name in ("audit", "jobs", "quotas"):
            logging.getLogger(name).setLevel(logging.WARNING)

        def progress(done: int, total: int) -> None:
            if not quiet and (done == total or done % 50 == 0):
                print(f"replay: {done}/{total} jobs finished", file=sys.stderr, flush=True)

        config = ReplayConfig(
            trace=Path(opts["trace"]),
            cluster=opts["cluster"],
            policy=opts["policy"],
            data_dir=Path(data),
            seed=opts["seed"],
            start=opts["start"],
            limit=opts["limit"],
            grace_s=opts["grace_seconds"],
            progress=progress,
            teams=opts["teams"],
            whole_gpus=opts["whole_gpus"],
            eta=opts["eta_json"] is not None,
        )
        old_name = None
        if not opts["use_configured_db"]:
            old_name = connection.settings_dict["NAME"]
            connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        try:
            cpu0 = time.process_time()
            try:
                outcome = run_replay(config)
            except ReplayError as exc:
                raise CommandError(str(exc), returncode=2) from None
            replay = outcome.summary()
            replay["cpu_s"] = round(time.process_time() - cpu0, 3)
            eta = eta_summary(outcome, min_wait_s=opts["min_wait_s"]) if config.eta else None
        finally:
            if old_name is not None:
                connection.creation.destroy_test_db(old_name, verbosity=0)
        report: dict[str, Any] = {
            "trace": str(config.trace),
            "first_job": config.start,
            "jobs": len(outcome.jobs),
            "cluster": {"name": outcome.spec.name, "total_gpus": outcome.spec.total_gpus},
            "policy": config.policy,
            "seed": config.seed,
            "config": {
                "cycle_s": config.cycle_s,
                "round_s": config.round_s,
                "grace_s": config.grace_s,
                "restart_penalty_s": config.restart_penalty_s,
                "slowdown_tolerance": config.slowdown_tolerance,
                "teams": config.teams,
                "whole_gpus": config.whole_gpus,
            },
            "commit": _git_commit(),
            "database": connection.vendor,
            "replay": replay,
        }
        if opts["compare"]:
            sim = simulate(config)
            report["simulator"] = {k: v for k, v in sim.items() if k not in ("timeline", "jct_cdf_s")}
            report["ratio_replay_to_simulator"] = {
                k: (replay[k] / sim[k] if sim.get(k) else None) for k in COMPARED if k in sim and k in replay
            }
        if outcome.guarantees:
            report["teams"] = {
                name: {"jobs": sum(team_of(j.trace) == name for j in outcome.jobs), "guarantee_gpus": g}
                for name, g in sorted(outcome.guarantees.items())
            }
        out = Path(opts["json"])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1, default=float) + "\n")
        if eta is not None:
            eta_report = {
                "command": command_line(opts),
                "trace": str(config.trace),
                "slice": {"start": config.start, "limit": config.limit, "jobs": len(outcome.jobs)},
                "cluster": outcome.spec.name,
                "policy": config.policy,
                "config": {**report["config"], "min_wait_s": opts["min_wait_s"]},
                "teams": report.get("teams", {}),
                **eta,
                "replay": {k: replay[k] for k in ("avg_jct_s", "avg_queueing_s", "preemptions", "cpu_s")},
                "database": report["database"],
                "provenance": collect([config.trace]),
            }
            eta_out = Path(opts["eta_json"])
            eta_out.parent.mkdir(parents=True, exist_ok=True)
            eta_out.write_text(json.dumps(eta_report, indent=2) + "\n")
        line = (
            f"replay {config.policy}: {replay['jobs']} jobs, avg JCT {replay['avg_jct_s'] / 3600:.3f} h, "
            f"p99 {replay['p99_jct_s'] / 3600:.2f} h, preemptions {replay['preemptions']}, "
            f"migrations {replay['migrations']}, {replay['cpu_s']:.1f} CPU-s"
        )
        if "simulator" in report:
            sim_s = report["simulator"]
            line += (
                f" | simulator avg JCT {sim_s['avg_jct_s'] / 3600:.3f} h, preemptions {sim_s['preemptions']}, "
                f"migrations {sim_s['migrations']}"
            )
        if eta is not None:
            best = eta["estimates"]["entry_and_rounds"]
            line += f" | ETA error median {best['median_rel_error']}, p90 {best['p90_rel_error']}"
        self.stdout.write(line)

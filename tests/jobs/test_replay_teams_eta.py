"""``manage.py replay --teams vc --eta-json``: the trace's teams as platform teams with the
simulator's guarantees, and the platform's queue ETAs scored against the actual starts.

Real PostgreSQL (or the configured database), the platform's services, cycle and ETA code; traces of
a few jobs written here (ITP format, the team in ``model_name``), on one node of a tiny cluster, so
that guarantees, estimates and errors can be worked out by hand (each test's comment).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command

from accounts.models import Membership, Team
from jobs.models import Job
from jobs.replay import ReplayConfig, run_replay
from jobs.replay_eta import ENTRY, ROUND, EtaLog, score
from jobs.replay_teams import ADMIN_USERNAME, slug_of
from quotas.models import Quota, QuotaEvent
from scheduler.bench.team_guarantees import guarantees_by_demand
from scheduler.datapaths import default_data_dir
from scheduler.sim.trace import load_trace

DATA = default_data_dir()
needs_data = pytest.mark.skipif(
    not (DATA / "interference" / "gavel" / "gavel_pairs_single_gpu.csv").is_file(),
    reason=f"the Gavel throughputs (the ground truth) are not in {DATA}/interference/gavel",
)
pytestmark = [needs_data, pytest.mark.django_db(transaction=True)]


def write_cluster(tmp_path: Path, gpus: int) -> Path:
    path = tmp_path / f"tiny-1x{gpus}.yaml"
    path.write_text(
        f"name: tiny-1x{gpus}\ngavel_gpu_type: p100\nnode_groups:\n"
        f"  - count: 1\n    gpus: {gpus}\n    gpu_model: P100\n    gpu_memory_mib: 16384\n"
    )
    return path


def write_trace(tmp_path: Path, rows: list[tuple[float, float, int, str]]) -> Path:
    """(submit s, duration s, GPUs, team) per job."""
    path = tmp_path / "trace.csv"
    lines = ["job_id,submission_time,num_gpu,duration,model_name"]
    lines += [f"j{i},{s},{g},{d},{team}" for i, (s, d, g, team) in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_each_trace_team_becomes_a_team_with_the_simulators_guarantee_set_by_an_admin(
    tmp_path: Path,
) -> None:
    # Four GPUs. Demand (GPU-s): a 2 x 250 = 500, b 1 x 350 = 350, c 1 x 150 = 150, of 1,000: exact
    # shares 2.0, 1.4 and 0.6 GPUs, rounded down 2, 1, 0; the GPU left goes to the largest remainder,
    # c (0.6 against b's 0.4): guarantees a 2, b 1, c 1.
    trace = write_trace(tmp_path, [(0, 250, 2, "a"), (1, 350, 1, "b"), (2, 150, 1, "c")])
    config = ReplayConfig(
        trace=trace,
        cluster=str(write_cluster(tmp_path, gpus=4)),
        policy="fifo",
        data_dir=DATA,
        teams="vc",
    )
    outcome = run_replay(config)

    assert outcome.guarantees == {"a": 2, "b": 1, "c": 1}
    assert outcome.guarantees == guarantees_by_demand(load_trace(trace).jobs, 4)
    for name, gpus in outcome.guarantees.items():
        team = Team.objects.get(slug=slug_of(name))
        quota = Quota.objects.get(team=team)
        assert quota.guaranteed_gpu_milli == gpus * 1000
        assert quota.max_gpu_milli == quota.per_user_gpu_milli == 4000  # may borrow the whole cluster
        assert quota.lending_limit_gpu_milli is None
        # Set through the quota service by the replay's administrator (audited).
        event = QuotaEvent.objects.filter(team=team, kind=QuotaEvent.Kind.LIMITS_SET).get()
        assert event.actor == ADMIN_USERNAME and f"guaranteed_gpu_milli={gpus * 1000}" in event.message
        member = Membership.objects.get(team=team)
        assert member.user.username == slug_of(name)
    # Each job was submitted by its team's member, charged to its team.
    teams = [Job.objects.get(pk=pk).team.slug for pk in outcome.job_ids]
    assert teams == [slug_of("a"), slug_of("b"), slug_of("c")]
    assert not Team.objects.filter(slug="replay").exists()  # the default mode's single team


# Two GPUs, ``ours`` on whole GPUs, teams a and b. J0 (a, 2 GPUs, 50 s) runs 0 -> 50. J1 (a, 2
# GPUs, 1,000 s) starts at 60 and ends at 1,060. J2 (b, 2 GPUs, 100 s) arrives at 65 and waits for
# J1: it starts at 1,060 (a cycle of the 10 s grid), a wait of 995 s. (J1 stays in the first LAS
# level, 2,000 GPU-s < 3,600: no preemption. Guarantees: a 2100 / 2300 of 2 GPUs -> 2, b 0: no
# reclaim.) J2's estimates:
#   t=70 (entry, after the cycle that left it waiting): J1 has run 10 s; its user's 2-GPU runs of the
#     image are J0's 50 s, which ran 40 s beyond that: J1 is expected to end at 110, J2 to start then;
#   t=360 and t=720 (rounds): J1 has outlived every run of its pools, so it is expected to run as
#     long again (a guess: RuntimeHistory's Pareto-tail rule), 300 s from 360 and 660 s from 720: J2's
#     ETA is 660, then 1,380. Its simulated duration (1,000 s, the trace's) is never read: the oracle
#     that made these 1,060 exact is gone.
# Tenths of the wait, 65 + 99.5 k: k = 0, 1, 2 show the entry estimate (error 950 / 995), k = 3..6
# the first round's (400 / 995), k = 7..9 the second's (320 / 995). On the rounds' estimates alone,
# k = 0..6 show the first round's.
ETA_ROWS = [(0, 50, 2, "a"), (60, 1000, 2, "a"), (65, 100, 2, "b")]
ENTRY_ERROR = 950 / 995
ROUND_ERRORS = (400 / 995, 320 / 995)


def eta_config(tmp_path: Path, *, eta: bool) -> ReplayConfig:
    return ReplayConfig(
        trace=write_trace(tmp_path, ETA_ROWS),
        cluster=str(write_cluster(tmp_path, gpus=2)),
        policy="ours",
        data_dir=DATA,
        teams="vc",
        whole_gpus=True,
        eta=eta,
    )


def test_the_platforms_etas_are_recorded_at_entry_and_at_rounds_and_scored_at_tenths_of_the_wait(
    tmp_path: Path,
) -> None:
    outcome = run_replay(eta_config(tmp_path, eta=True))

    assert outcome.first_start.tolist() == pytest.approx([0, 60, 1060])
    log = outcome.eta_log
    assert log is not None
    waiting = outcome.job_ids[2]
    # (Confidence medium: J1's end from its user's history; low: from a guess.)
    assert log.estimates[waiting] == [
        (pytest.approx(70), pytest.approx(110), ENTRY, "medium"),
        (pytest.approx(360), pytest.approx(660), ROUND, "low"),
        (pytest.approx(720), pytest.approx(1380), ROUND, "low"),
    ]
    assert set(log.estimates) == {waiting}  # nobody else ever waited at a refresh
    args = (log, outcome.job_ids, outcome.submit, outcome.first_start)
    both = score(*args, min_wait_s=60)
    assert both == {
        "jobs": 1,
        "points": 10,
        "unknown_points": 0,
        "median_rel_error": round(ROUND_ERRORS[0], 4),  # the 5th and 6th of the sorted errors
        "p90_rel_error": round(ENTRY_ERROR, 4),  # the 9th and 10th
        "within_25pct": 0.0,
        "points_by_confidence": {"medium": 3, "low": 7},
    }
    rounds = score(*args, min_wait_s=60, kinds=(ROUND,))
    assert rounds["points"] == 10
    assert rounds["median_rel_error"] == rounds["p90_rel_error"] == round(ROUND_ERRORS[0], 4)
    # A job that waited less than min_wait_s is left out.
    assert score(*args, min_wait_s=1000)["jobs"] == 0


def test_recording_etas_changes_no_decision_of_the_replay(tmp_path: Path) -> None:
    with_eta = run_replay(eta_config(tmp_path, eta=True))
    Job.objects.all().delete()
    without = run_replay(eta_config(tmp_path, eta=False))
    assert without.eta_log is None
    np.testing.assert_array_equal(with_eta.first_start, without.first_start)
    np.testing.assert_array_equal(with_eta.finish, without.finish)


def test_an_unknown_estimate_is_counted_apart_from_the_errors() -> None:
    # Job 1 waited 100 s (submit 0, start 100): at t=0 the estimate was unknown, from t=50 on 150.
    # Tenths 0..4 show the unknown one, 5..9 the estimate 150 (error 50 / 100).
    log = EtaLog(epoch=0.0)
    log.add(0.0, {1: (None, "low")}, ENTRY)
    log.add(50.0, {1: (150.0, "medium")}, ROUND)
    found = score(log, [1], np.array([0.0]), np.array([100.0]), min_wait_s=60)
    assert found["unknown_points"] == 5 and found["points"] == 5
    assert found["median_rel_error"] == 0.5 and found["within_25pct"] == 0.0


def test_the_command_writes_the_eta_report_with_the_teams_and_its_provenance(tmp_path: Path) -> None:
    eta_out = tmp_path / "eta.json"
    call_command(
        "replay",
        "--trace",
        str(write_trace(tmp_path, ETA_ROWS)),
        "--cluster",
        str(write_cluster(tmp_path, gpus=2)),
        "--policy",
        "ours",
        "--teams",
        "vc",
        "--whole-gpus",
        "--json",
        str(tmp_path / "replay.json"),
        "--eta-json",
        str(eta_out),
        "--data",
        str(DATA),
        "--use-configured-db",
        "--quiet",
    )
    report = json.loads(eta_out.read_text())
    assert report["teams"] == {"a": {"jobs": 2, "guarantee_gpus": 2}, "b": {"jobs": 1, "guarantee_gpus": 0}}
    assert report["estimates"]["entry_and_rounds"]["within_25pct"] == 0.0
    assert report["estimates"]["rounds_only"]["median_rel_error"] == round(ROUND_ERRORS[0], 4)
    assert report["refreshes"] == {ENTRY: 1, ROUND: 2}
    assert report["config"]["teams"] == "vc" and report["config"]["whole_gpus"] is True
    assert "--teams vc" in report["command"]
    assert report["provenance"]["data"][0]["path"].endswith("trace.csv")

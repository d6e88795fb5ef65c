"""``manage.py replay`` drives the platform through a trace and agrees with the simulator.

The traces are a handful of jobs the tests write themselves, on a tiny cluster, so the expected start
and finish of every job can be worked out by hand (in each test's comment). The performance ground
truth (Gavel's measured throughputs) comes from the shared data; the tests skip without it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from jobs.models import Job, JobEvent
from jobs.replay import EPOCH, ReplayConfig, ReplayOutcome, clock_at, run_replay, sim_config
from jobs.states import JobStatus
from scheduler.datapaths import default_data_dir
from scheduler.sim.runner import load_inputs, run_policies

DATA = default_data_dir()
needs_data = pytest.mark.skipif(
    not (DATA / "interference" / "gavel" / "gavel_pairs_single_gpu.csv").is_file(),
    reason=f"the Gavel throughputs (the ground truth) are not in {DATA}/interference/gavel",
)
pytestmark = [needs_data, pytest.mark.django_db(transaction=True)]


def write_cluster(tmp_path: Path, gpus: int, nodes: int = 1) -> Path:
    path = tmp_path / f"tiny-{nodes}x{gpus}.yaml"
    path.write_text(
        f"name: tiny-{nodes}x{gpus}\ngavel_gpu_type: p100\nnode_groups:\n"
        f"  - count: {nodes}\n    gpus: {gpus}\n    gpu_model: P100\n    gpu_memory_mib: 16384\n"
    )
    return path


def write_trace(tmp_path: Path, rows: list[tuple[float, float, int]]) -> Path:
    """An ITP-format trace: (submit s, duration s, GPUs) per job."""
    path = tmp_path / "trace.csv"
    lines = ["job_id,submission_time,num_gpu,duration"]
    lines += [f"j{i},{submit},{gpus},{duration}" for i, (submit, duration, gpus) in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def replay_and_simulate(config: ReplayConfig) -> tuple[ReplayOutcome, np.ndarray, np.ndarray, dict]:
    outcome = run_replay(config)
    trace, spec, perf = load_inputs(config.trace, config.cluster, config.data_dir, config.seed)
    report, raw = run_policies(trace, spec, perf, [config.policy], sim_config(config))
    result = raw[config.policy]
    return outcome, result.first_start, result.finish, report["policies"][config.policy]


def test_a_fifo_replay_starts_and_finishes_every_job_when_the_simulator_does(tmp_path: Path) -> None:
    # Two GPUs, three 1-GPU jobs (whole GPUs under fifo). Cycles run on the 10 s beat grid:
    #   t=0: A (submitted 0) starts; t=10: B (5) starts, C (7) waits: both GPUs are taken;
    #   t=60: B ends (10 + 50); the cycle at 60 starts C, which ends at 90;
    #   t=100: A ends (0 + 100).
    config = ReplayConfig(
        trace=write_trace(tmp_path, [(0, 100, 1), (5, 50, 1), (7, 30, 1)]),
        cluster=str(write_cluster(tmp_path, gpus=2)),
        policy="fifo",
        data_dir=DATA,
    )
    outcome, sim_start, sim_finish, sim_summary = replay_and_simulate(config)
    assert outcome.first_start.tolist() == pytest.approx([0, 10, 60])
    assert outcome.finish.tolist() == pytest.approx([100, 60, 90])
    assert outcome.first_start.tolist() == pytest.approx(sim_start.tolist())
    assert outcome.finish.tolist() == pytest.approx(sim_finish.tolist())
    summary = outcome.summary()
    assert summary["avg_jct_s"] == pytest.approx((100 + 55 + 83) / 3)
    assert summary["avg_jct_s"] == pytest.approx(sim_summary["avg_jct_s"])
    # The platform really ran them: every job went through the state machine to SUCCEEDED.
    jobs = Job.objects.filter(pk__in=outcome.job_ids)
    assert {j.status for j in jobs} == {JobStatus.SUCCEEDED.value}
    path = [e.to_status for e in JobEvent.objects.filter(job_id=outcome.job_ids[2]).order_by("id")]
    assert path[-4:] == ["ADMITTED", "STARTING", "RUNNING", "SUCCEEDED"]


def test_a_multi_gpu_job_across_nodes_runs_at_the_simulators_network_rate(tmp_path: Path) -> None:
    # Two nodes of 2 GPUs. A (2 GPUs, 100 s) takes one node at t=0; B (submitted 1 s, 4 GPUs) can
    # only start when A ends at 100 and then spans both nodes: its rate is comm_rate(NET) relative to
    # its best placement (also NET: 4 GPUs do not fit one node), 1.0, so it ends at 100 + 200. C (1
    # GPU, submitted 2 s) fits the free node at t=10 (placement goes on past a job that does not
    # fit), ending at 40.
    config = ReplayConfig(
        trace=write_trace(tmp_path, [(0, 100, 2), (1, 200, 4), (2, 30, 1)]),
        cluster=str(write_cluster(tmp_path, gpus=2, nodes=2)),
        policy="k8s",
        data_dir=DATA,
    )
    outcome, sim_start, sim_finish, _ = replay_and_simulate(config)
    assert outcome.first_start.tolist() == pytest.approx(sim_start.tolist())
    assert outcome.finish.tolist() == pytest.approx(sim_finish.tolist())
    assert outcome.finish.tolist() == pytest.approx([100, 300, 40])
    assert Job.objects.get(pk=outcome.job_ids[1]).replicas == 2


def test_a_preempted_job_resumes_from_its_checkpoint_and_pays_the_restart_cost(tmp_path: Path) -> None:
    # One GPU, Tiresias (2D-LAS; levels at 1 and 10 GPU-h, rounds every 360 s). A (5,000 s) starts at
    # t=0 and passes 3,600 GPU-s at t=3,600. B (100 s) arrives at 4,000: level 0 beats A's level 1 at
    # the round of t=4,320, which preempts A (zero grace): B runs 4,320 -> 4,420. A then resumes with
    # its checkpoint (5,000 - 4,320 = 680 s left) plus the 30 s restart: it ends at 4,420 + 710 = 5,130.
    config = ReplayConfig(
        trace=write_trace(tmp_path, [(0, 5000, 1), (4000, 100, 1)]),
        cluster=str(write_cluster(tmp_path, gpus=1)),
        policy="tiresias",
        data_dir=DATA,
    )
    outcome, sim_start, sim_finish, sim_summary = replay_and_simulate(config)
    assert outcome.finish.tolist() == pytest.approx([5130, 4420])
    assert outcome.finish.tolist() == pytest.approx(sim_finish.tolist())
    assert outcome.preemptions == sim_summary["preemptions"] == 1
    victim = Job.objects.get(pk=outcome.job_ids[0])
    assert victim.preemptions == 1
    statuses = [e.to_status for e in JobEvent.objects.filter(job=victim).order_by("id")]
    assert "PREEMPTING" in statuses and statuses.count("RUNNING") == 2


def test_a_job_a_round_places_without_preempting_starts_at_the_round(tmp_path: Path) -> None:
    # Two GPUs, Tiresias. A (1,000 s) runs from t=0; B (100 s) arrives at 355 while A runs, so the
    # round of t=360 is due and coincides with the cycle of the 10 s grid. The round places B on the
    # idle GPU (nobody is preempted): B runs 360 -> 460, in the database as in the simulator.
    config = ReplayConfig(
        trace=write_trace(tmp_path, [(0, 1000, 1), (355, 100, 1)]),
        cluster=str(write_cluster(tmp_path, gpus=2)),
        policy="tiresias",
        data_dir=DATA,
    )
    outcome, sim_start, sim_finish, _ = replay_and_simulate(config)
    assert outcome.first_start.tolist() == pytest.approx([0, 360])
    assert outcome.first_start.tolist() == pytest.approx(sim_start.tolist())
    assert outcome.finish.tolist() == pytest.approx(sim_finish.tolist())
    assert outcome.preemptions == 0


def test_the_command_writes_the_simulators_metrics_for_the_replay_and_the_simulator(tmp_path: Path) -> None:
    out = tmp_path / "replay.json"
    call_command(
        "replay",
        "--trace",
        str(write_trace(tmp_path, [(0, 100, 1), (5, 50, 1), (7, 30, 1)])),
        "--cluster",
        str(write_cluster(tmp_path, gpus=2)),
        "--policy",
        "fifo",
        "--json",
        str(out),
        "--data",
        str(DATA),
        "--compare",
        "--use-configured-db",
        "--quiet",
    )
    report = json.loads(out.read_text())
    for key in ("avg_jct_s", "p99_jct_s", "preemptions", "migrations", "jobs"):
        assert key in report["replay"] and key in report["simulator"]
    assert report["replay"]["jobs"] == 3
    assert report["ratio_replay_to_simulator"]["avg_jct_s"] == pytest.approx(1.0)
    assert math.isclose(report["replay"]["avg_jct_s"], (100 + 55 + 83) / 3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "lottery"], "unknown policy 'lottery'"),
        (["--policy", "fifo", "--limit", "0"], "--limit must be a positive integer"),
        (["--policy", "fifo", "--cluster", "no-such-cluster"], "not found"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path: Path, args: list[str], message: str) -> None:
    base = {
        "--trace": str(write_trace(tmp_path, [(0, 10, 1)])),
        "--cluster": str(write_cluster(tmp_path, gpus=1)),
        "--json": str(tmp_path / "out.json"),
    }
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = [x for pair in base.items() for x in pair] + ["--use-configured-db", "--quiet"]
    with pytest.raises(CommandError, match=message) as caught:
        call_command("replay", *argv)
    assert caught.value.returncode == 2
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("timestamp", [EPOCH + 3379.1761701107025, EPOCH + 0.1, EPOCH, 1767228979.9999999])
def test_the_virtual_clock_set_for_an_event_never_reads_before_it(timestamp: float) -> None:
    import time

    import time_machine

    with time_machine.travel(0, tick=False) as traveller:
        traveller.move_to(clock_at(timestamp))
        assert time.time() >= timestamp
        assert time.time() - timestamp < 2e-6

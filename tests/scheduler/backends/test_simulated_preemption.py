"""The simulated backend's side of the checkpoint contract and its performance ground truth.

Preemption: SIGTERM, a grace period in simulated time, a checkpoint of the progress made, and a
restart cost on the next run. Progress: rates from ``scheduler.sim.perf`` (co-tenants on a shared GPU,
the links of a multi-GPU job), so a task ends when the simulator says it would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler.backends.base import PREEMPTED_PREFIX, TaskPhase, TaskSpec
from scheduler.backends.simulated import JOB_TYPE_ENV, SimulatedBackend
from scheduler.datapaths import default_data_dir
from scheduler.model import Placement
from scheduler.sim.perf import JobType, PerfModel, comm_rate


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


def node(name: str = "n0", gpus: int = 2, links: list[list[Any]] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "cpu_milli": 64_000,
        "memory_mib": 512 * 1024,
        "gpu_model": "P100",
        "gpu_count": gpus,
        "gpu_memory_mib": 16_384,
        "links": links or [],
    }


# Two job types: "a" keeps 50 % of its speed beside "b", "b" keeps 80 % beside "a".
PERF = PerfModel(
    gpu_type="p100",
    job_types=[JobType("a", "ResNet-18", 32), JobType("b", "Transformer", 64)],
    iso_tput={"a": 10.0, "b": 5.0},
    pair_norm={("a", "b"): 0.5, ("b", "a"): 0.8, ("a", "a"): 0.5, ("b", "b"): 0.5},
)


def backend(
    tmp_path: Path, clock: Clock, nodes: list[dict[str, Any]] | None = None, **kw: Any
) -> SimulatedBackend:
    return SimulatedBackend(
        tmp_path / "c.json",
        cluster=nodes or [node()],
        time_scale=1.0,
        clock=clock,
        pending_s=0.0,
        startup_s=0.0,
        perf=PERF,
        **kw,
    )


def spec(job: str, duration: float, job_type: str = "a", index: int = 0, **kw: Any) -> TaskSpec:
    return TaskSpec(
        job_id=job,
        task_id=f"job-{job}-{index}",
        sim_duration_s=duration,
        env={JOB_TYPE_ENV: job_type},
        **kw,
    )


def place(
    job: str, gpus: tuple[int, ...] = (0,), milli: int = 1000, index: int = 0, on: str = "n0"
) -> Placement:
    return Placement(
        job_id=job,
        task_id=f"job-{job}-{index}",
        node=on,
        gpu_indices=gpus,
        gpu_milli=milli,
        gpu_memory_mib=4096 if milli < 1000 else 0,
    )


def status(b: SimulatedBackend, job: str) -> Any:
    (st,) = b.task_statuses(job_id=job)
    return st


def test_a_preempted_task_holds_its_gpus_through_the_grace_period_then_stops_as_preempted(
    tmp_path: Path,
) -> None:
    clock = Clock()
    b = backend(tmp_path, clock)
    b.bind(spec("1", 1000.0), place("1"))
    clock.t += 100
    b.preempt_job("1", grace_seconds=30)
    clock.t += 29
    assert status(b, "1").phase is TaskPhase.RUNNING
    assert b.snapshot().node("n0").gpus[0].used_milli == 1000
    clock.t += 2
    st = status(b, "1")
    assert st.phase is TaskPhase.FAILED
    assert (st.exit_code, st.failure_category) == (None, "")
    assert st.message.startswith(PREEMPTED_PREFIX)
    assert st.finished_at == pytest.approx(1_000 + 130)
    assert b.snapshot().node("n0").gpus[0].is_idle


def test_the_next_run_resumes_from_the_checkpoint_and_pays_the_restart_cost(tmp_path: Path) -> None:
    clock = Clock()
    b = backend(tmp_path, clock, restart_penalty_s=30.0)
    b.bind(spec("1", 1000.0), place("1"))
    clock.t += 400
    b.preempt_job("1", grace_seconds=0)  # 600 s of work left, kept in the checkpoint
    b.delete_job("1")  # the platform forgets the run; the checkpoint survives
    clock.t += 50
    b.bind(spec("1", 1000.0, resume=True), place("1", gpus=(1,)))
    clock.t += 629
    assert status(b, "1").phase is TaskPhase.RUNNING
    clock.t += 2
    st = status(b, "1")
    assert st.phase is TaskPhase.SUCCEEDED
    assert st.finished_at == pytest.approx(1_000 + 450 + 630)
    env = b._load()["tasks"]["job-1-0"]["env"]
    assert env["RESUME"] == "1"
    assert env["CHECKPOINT_DIR"] == b.checkpoint_dir("1")
    assert env["PREEMPTION_GRACE_SECONDS"] == "30"


def test_a_job_that_ends_within_its_grace_period_succeeds(tmp_path: Path) -> None:
    clock = Clock()
    b = backend(tmp_path, clock)
    b.bind(spec("1", 100.0), place("1"))
    clock.t += 90
    b.preempt_job("1", grace_seconds=30)
    clock.t += 20
    st = status(b, "1")
    assert (st.phase, st.exit_code) == (TaskPhase.SUCCEEDED, 0)
    assert st.finished_at == pytest.approx(1_100)


def test_deleting_a_job_kills_it_without_a_new_checkpoint(tmp_path: Path) -> None:
    clock = Clock()
    b = backend(tmp_path, clock)
    b.bind(spec("1", 1000.0), place("1"))
    clock.t += 400
    b.delete_job("1")
    b.bind(spec("1", 1000.0), place("1"))
    clock.t += 999
    assert status(b, "1").phase is TaskPhase.RUNNING  # all 1,000 s again: nothing was saved
    env = b._load()["tasks"]["job-1-0"]["env"]
    assert "RESUME" not in env


def test_co_tenants_on_a_shared_gpu_slow_each_other_down_as_the_measured_pairs_say(tmp_path: Path) -> None:
    # a beside b runs at 0.5, b beside a at 0.8. a has 100 s of work, b 200 s; both start at 1,000.
    # a ends when 0.5 t = 100 (t = 200); b then has 200 - 0.8 * 200 = 40 s left alone: ends at 240.
    clock = Clock()
    b = backend(tmp_path, clock)
    b.bind(spec("1", 100.0, "a"), place("1", milli=500))
    b.bind(spec("2", 200.0, "b"), place("2", milli=500))
    assert b.next_event_at() == pytest.approx(1_200)
    clock.t += 250
    assert status(b, "1").finished_at == pytest.approx(1_200)
    assert status(b, "2").finished_at == pytest.approx(1_240)


def test_a_task_alone_on_a_shared_gpu_runs_at_full_speed_once_its_neighbour_is_deleted(
    tmp_path: Path,
) -> None:
    clock = Clock()
    b = backend(tmp_path, clock)
    b.bind(spec("1", 100.0, "a"), place("1", milli=500))
    b.bind(spec("2", 1000.0, "b"), place("2", milli=500))
    clock.t += 100  # a did 50 s of work beside b
    b.delete_job("2")
    clock.t += 60
    assert status(b, "1").finished_at == pytest.approx(1_150)


def test_a_multi_gpu_job_on_a_slow_link_runs_at_the_communication_rate(tmp_path: Path) -> None:
    # GPUs 0-1 share an NVLink, 2 is across the socket (SYS). On 0 and 2 the bottleneck is SYS; the
    # trace measured the job on its best pair (NV): rate = comm_rate(SYS) / comm_rate(NV).
    links = [[0, 1, "NV"], [0, 2, "SYS"], [1, 2, "SYS"]]
    clock = Clock()
    b = backend(tmp_path, clock, nodes=[node(gpus=3, links=links)])
    b.bind(spec("1", 100.0, "b", world_size=1), place("1", gpus=(0, 2)))
    fraction = PERF.job_types[1].comm_fraction
    rate = comm_rate(fraction, "SYS") / comm_rate(fraction, "NV")
    assert rate < 1
    assert b.next_event_at() == pytest.approx(1_000 + 100 / rate)
    b.bind(spec("2", 100.0, "b"), place("2", gpus=(1,)))
    assert b.next_event_at() == pytest.approx(1_000 + 100)  # the 1-GPU job needs no link


def test_a_gang_across_nodes_runs_at_the_network_rate_relative_to_its_best_single_node_set(
    tmp_path: Path,
) -> None:
    nv = [[0, 1, "NV"]]
    clock = Clock()
    b = backend(tmp_path, clock, nodes=[node("n0", links=nv), node("n1", links=nv)])
    # 2 GPUs as two 1-GPU replicas on two nodes: NET, where one node's NVLink pair was possible.
    b.bind(spec("1", 100.0, "a", index=0, world_size=2), place("1", gpus=(0,), index=0, on="n0"))
    b.bind(spec("1", 100.0, "a", index=1, world_size=2), place("1", gpus=(0,), index=1, on="n1"))
    fraction = PERF.job_types[0].comm_fraction
    rate = comm_rate(fraction, "NET") / comm_rate(fraction, "NV")
    assert b.next_event_at() == pytest.approx(1_000 + 100 / rate)


def test_without_a_job_type_a_task_runs_at_full_speed(tmp_path: Path) -> None:
    clock = Clock()
    b = backend(tmp_path, clock)
    b.bind(TaskSpec(job_id="1", task_id="job-1-0", sim_duration_s=100.0), place("1", milli=500))
    b.bind(spec("2", 100.0, "a"), place("2", milli=500))
    assert status(b, "1").started_at == pytest.approx(1_000)
    assert b.next_event_at() == pytest.approx(1_100)


@pytest.mark.skipif(
    not (default_data_dir() / "topologies").is_dir(),
    reason=f"the simulator's topology files are not in {default_data_dir()}/topologies",
)
def test_a_simulator_cluster_spec_gives_the_simulators_nodes(tmp_path: Path) -> None:
    from scheduler.sim.cluster import load_cluster_spec

    sim_nodes, _ = load_cluster_spec("philly-256", default_data_dir()).build_nodes()
    snapshot = SimulatedBackend(tmp_path / "c.json", cluster="philly-256").snapshot()
    assert [n.name for n in snapshot.nodes] == [n.name for n in sim_nodes]
    assert [(n.cpu_milli, n.memory_mib, len(n.gpus)) for n in snapshot.nodes] == [
        (n.cpu_milli, n.memory_mib, len(n.gpus)) for n in sim_nodes
    ]
    assert snapshot.nodes[0].topology == sim_nodes[0].topology


def test_the_profile_of_a_job_type_is_the_simulators_for_queued_and_running_jobs(tmp_path: Path) -> None:
    clock = Clock()
    b = backend(tmp_path, clock)
    queued = b.job_profile({JOB_TYPE_ENV: "b"})
    assert queued["job_key"] == "gavel:p100:b"
    assert (queued["model_family"], queued["batch_size"], queued["solo_throughput"]) == (
        "Transformer",
        64.0,
        5.0,
    )
    assert b.job_profile({}) == {} and b.job_profile({JOB_TYPE_ENV: "unknown"}) == {}
    b.bind(spec("1", 100.0, "b"), place("1", milli=500))
    assert b.snapshot().task_profiles["job-1-0"] == queued
    tolerant = TaskSpec(
        job_id="2",
        task_id="job-2-0",
        sim_duration_s=100.0,
        env={JOB_TYPE_ENV: "a", "SIM_SLOWDOWN_TOLERANCE": "1.25"},
    )
    b.bind(tolerant, place("2", milli=500))
    assert b.snapshot().task_profiles["job-2-0"]["slowdown_tolerance"] == 1.25

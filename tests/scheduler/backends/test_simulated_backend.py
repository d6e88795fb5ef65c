"""The simulated cluster backend: lifecycle over injected time, idempotent binds, shared state file."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scheduler.backends import base
from scheduler.backends.base import ClusterBackend, PermanentBackendError, TaskPhase, TaskSpec
from scheduler.backends.simulated import PlacementConflictError, SimulatedBackend
from scheduler.model import Placement

REPO_ROOT = Path(__file__).resolve().parents[3]


class FakeClock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def backend(tmp_path: Path, clock: FakeClock) -> SimulatedBackend:
    # time_scale 10: one real second is ten simulated seconds; pending 2 s, startup 10 s (simulated).
    return SimulatedBackend(tmp_path / "cluster.json", cluster="small", time_scale=10.0, clock=clock)


def spec(task_id: str = "job-1-0", job_id: str = "1", **kw: object) -> TaskSpec:
    return TaskSpec(job_id=job_id, task_id=task_id, image="pytorch:2.4", command=["python", "train.py"], **kw)  # type: ignore[arg-type]


def placement(
    task_id: str = "job-1-0", job_id: str = "1", gpus: tuple[int, ...] = (0,), milli: int = 250
) -> Placement:
    return Placement(
        job_id=job_id,
        task_id=task_id,
        node="t4-1",
        gpu_indices=gpus,
        gpu_milli=milli,
        gpu_memory_mib=4096,
        cpu_milli=1000,
        memory_mib=2048,
    )


def phase_of(backend: SimulatedBackend, task_id: str = "job-1-0") -> TaskPhase:
    (status,) = [s for s in backend.task_statuses() if s.task_id == task_id]
    return status.phase


def test_it_implements_the_cluster_backend_protocol(backend: SimulatedBackend) -> None:
    assert isinstance(backend, ClusterBackend)


def test_the_demo_cluster_has_four_nvlink_v100_nodes_and_four_t4_nodes(tmp_path: Path) -> None:
    snapshot = SimulatedBackend(tmp_path / "demo.json", cluster="demo").snapshot()
    v100 = [n for n in snapshot.nodes if n.gpu_model == "V100-SXM2-32GB"]
    t4 = [n for n in snapshot.nodes if n.gpu_model == "T4"]
    assert len(v100) == 4 and all(len(n.gpus) == 8 for n in v100)
    assert len(t4) == 4 and all(len(n.gpus) == 2 for n in t4)
    assert all(g.memory_mib == 32 * 1024 for n in v100 for g in n.gpus)
    assert all(g.memory_mib == 16 * 1024 for n in t4 for g in n.gpus)


def test_v100_nodes_carry_the_hybrid_cube_mesh_topology_when_the_parser_exists(tmp_path: Path) -> None:
    pytest.importorskip("scheduler.topology.parser", reason="scheduler.topology is not available")
    node = SimulatedBackend(tmp_path / "demo.json", cluster="demo").snapshot().nodes[0]
    links = node.topology.to_dict()["links"]
    assert links[0][3] == "NV2" and links[0][1] == "NV1" and links[0][5] == "SYS"


def test_a_bound_task_goes_pending_starting_running_then_succeeded(
    backend: SimulatedBackend, clock: FakeClock
) -> None:
    backend.bind(spec(sim_duration_s=100.0), placement())
    assert phase_of(backend) is TaskPhase.PENDING
    clock.advance(0.3)  # 3 simulated seconds: past the 2 s pending phase
    assert phase_of(backend) is TaskPhase.STARTING
    clock.advance(1.0)  # 13 s: past the 10 s startup
    assert phase_of(backend) is TaskPhase.RUNNING
    clock.advance(9.0)  # 103 s: not yet done (2 + 10 + 100 = 112)
    assert phase_of(backend) is TaskPhase.RUNNING
    clock.advance(1.0)
    (status,) = backend.task_statuses()
    assert status.phase is TaskPhase.SUCCEEDED
    assert status.exit_code == 0
    assert status.started_at is not None and status.finished_at is not None
    assert status.finished_at - status.started_at == pytest.approx(10.0)  # 100 simulated s at 10x


def test_without_a_duration_a_task_runs_the_default_duration(tmp_path: Path, clock: FakeClock) -> None:
    backend = SimulatedBackend(
        tmp_path / "c.json", cluster="small", time_scale=1.0, clock=clock, default_duration_s=50.0
    )
    backend.bind(spec(), placement())
    clock.advance(2 + 10 + 49)
    assert phase_of(backend) is TaskPhase.RUNNING
    clock.advance(2)
    assert phase_of(backend) is TaskPhase.SUCCEEDED


def test_binding_the_same_task_twice_is_a_no_op(backend: SimulatedBackend, clock: FakeClock) -> None:
    backend.bind(spec(), placement())
    clock.advance(0.5)
    backend.bind(spec(), placement())
    snapshot = backend.snapshot()
    assert [p.task_id for p in snapshot.running] == ["job-1-0"]
    assert snapshot.node("t4-1").gpus[0].used_milli == 250
    # The repeat did not restart the task: it is still as far along as before.
    assert phase_of(backend) is TaskPhase.STARTING


def test_binding_a_known_task_to_another_gpu_is_refused_as_a_placement_conflict(
    backend: SimulatedBackend,
) -> None:
    backend.bind(spec(), placement(gpus=(0,)))
    with pytest.raises(PlacementConflictError, match="already bound"):
        backend.bind(spec(), placement(gpus=(1,)))
    assert [s.gpu_indices for s in backend.task_statuses()] == [(0,)]


def test_the_placement_conflict_error_is_the_base_modules_permanent_error() -> None:
    # One class for every backend (jobs.binding catches it to re-plan); the old import still works.
    assert PlacementConflictError is base.PlacementConflictError
    assert issubclass(PlacementConflictError, PermanentBackendError)


def test_a_placement_that_would_oversubscribe_a_gpu_is_a_conflict(backend: SimulatedBackend) -> None:
    backend.bind(spec("job-1-0", "1"), placement("job-1-0", "1", milli=800))
    with pytest.raises(PlacementConflictError, match="does not fit"):
        backend.bind(spec("job-2-0", "2"), placement("job-2-0", "2", milli=250))
    backend.bind(spec("job-3-0", "3"), placement("job-3-0", "3", milli=200))
    assert backend.snapshot().node("t4-1").gpus[0].used_milli == 1000


def test_a_placement_on_an_unknown_node_is_refused(backend: SimulatedBackend) -> None:
    bad = placement()
    bad.node = "nowhere"
    with pytest.raises(PermanentBackendError, match="does not exist"):
        backend.bind(spec(), bad)


def test_the_snapshot_reflects_allocations_until_the_task_finishes(
    backend: SimulatedBackend, clock: FakeClock
) -> None:
    backend.bind(spec("job-1-0", "1", sim_duration_s=10.0), placement("job-1-0", "1", gpus=(1,), milli=600))
    node = backend.snapshot().node("t4-1")
    assert node.gpus[1].used_milli == 600
    assert node.gpus[1].used_memory_mib == 4096
    assert node.gpus[1].tenants == ["job-1-0"]
    assert node.used_cpu_milli == 1000 and node.used_memory_mib == 2048
    assert node.gpus[0].is_idle
    clock.advance(100)
    node = backend.snapshot().node("t4-1")
    assert node.gpus[1].is_idle and node.used_cpu_milli == 0
    assert backend.snapshot().running == []


def test_a_false_command_fails_as_a_user_error(backend: SimulatedBackend, clock: FakeClock) -> None:
    backend.bind(TaskSpec(job_id="1", task_id="job-1-0", command=["false"], sim_duration_s=1.0), placement())
    clock.advance(100)
    (status,) = backend.task_statuses()
    assert status.phase is TaskPhase.FAILED
    assert (status.exit_code, status.failure_category) == (1, "USER")


def test_sim_exit_code_137_fails_as_out_of_memory(backend: SimulatedBackend, clock: FakeClock) -> None:
    backend.bind(spec(env={"SIM_EXIT_CODE": "137"}, sim_duration_s=1.0), placement())
    clock.advance(100)
    (status,) = backend.task_statuses()
    assert (status.phase, status.exit_code, status.failure_category) == (TaskPhase.FAILED, 137, "OOM")


@pytest.mark.parametrize(
    ("category", "exit_code"),
    [("PLATFORM", None), ("HARDWARE", None), ("IMAGE", None), ("USER", 1), ("OOM", 137), ("TIMEOUT", 124)],
)
def test_sim_fail_category_fails_the_task_at_the_end_of_its_run_with_that_category(
    backend: SimulatedBackend, clock: FakeClock, category: str, exit_code: int | None
) -> None:
    backend.bind(spec(env={"SIM_FAIL_CATEGORY": category.lower()}, sim_duration_s=100.0), placement())
    clock.advance((2 + 10 + 99) / 10)
    assert phase_of(backend) is TaskPhase.RUNNING
    clock.advance(0.2)
    (status,) = backend.task_statuses()
    assert (status.phase, status.failure_category, status.exit_code) == (
        TaskPhase.FAILED,
        category,
        exit_code,
    )
    assert f"simulated {category} failure" in status.message
    assert backend.logs("1", "job-1-0").splitlines()[-1].endswith(status.message)


def test_sim_fail_attempts_fails_only_the_first_runs(backend: SimulatedBackend, clock: FakeClock) -> None:
    env = {"SIM_FAIL_CATEGORY": "PLATFORM", "SIM_FAIL_ATTEMPTS": "1"}
    backend.bind(spec(env=env, sim_duration_s=1.0), placement())
    clock.advance(100)
    assert [(s.phase, s.failure_category) for s in backend.task_statuses()] == [
        (TaskPhase.FAILED, "PLATFORM")
    ]

    backend.delete_job("1")
    backend.bind(spec(env=env, sim_duration_s=1.0, attempt=1), placement())  # the first retry
    clock.advance(100)
    assert [(s.phase, s.exit_code) for s in backend.task_statuses()] == [(TaskPhase.SUCCEEDED, 0)]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SIM_FAIL_CATEGORY": "GREMLINS"}, "is not one of PLATFORM, HARDWARE"),
        ({"SIM_FAIL_CATEGORY": "PLATFORM", "SIM_FAIL_ATTEMPTS": "two"}, "not an integer"),
    ],
)
def test_a_malformed_failure_injection_is_refused_at_bind(
    backend: SimulatedBackend, env: dict[str, str], message: str
) -> None:
    with pytest.raises(PermanentBackendError, match=message):
        backend.bind(spec(env=env), placement())
    assert backend.task_statuses() == []


def test_a_task_longer_than_its_max_runtime_is_killed_as_a_timeout(
    backend: SimulatedBackend, clock: FakeClock
) -> None:
    backend.bind(spec(sim_duration_s=1000.0, max_runtime_s=30), placement())
    clock.advance((2 + 10 + 31) / 10)
    (status,) = backend.task_statuses()
    assert (status.phase, status.failure_category, status.exit_code) == (TaskPhase.FAILED, "TIMEOUT", 124)


def test_delete_job_forgets_its_tasks_and_is_idempotent(backend: SimulatedBackend) -> None:
    backend.bind(spec("job-1-0", "1"), placement("job-1-0", "1", gpus=(0,)))
    backend.bind(spec("job-1-1", "1"), placement("job-1-1", "1", gpus=(1,)))
    backend.bind(spec("job-2-0", "2"), placement("job-2-0", "2", gpus=(0,)))
    backend.delete_job("1")
    backend.delete_job("1")
    assert [s.task_id for s in backend.task_statuses()] == ["job-2-0"]
    assert backend.task_statuses(job_id="1") == []


def test_finished_tasks_are_reported_until_the_retention_ends(tmp_path: Path, clock: FakeClock) -> None:
    backend = SimulatedBackend(
        tmp_path / "c.json", cluster="small", time_scale=1.0, clock=clock, finished_retention_s=60.0
    )
    backend.bind(spec("job-1-0", "1", sim_duration_s=1.0), placement("job-1-0", "1"))
    clock.advance(2 + 10 + 1 + 30)
    assert phase_of(backend, "job-1-0") is TaskPhase.SUCCEEDED
    clock.advance(60)
    backend.bind(spec("job-2-0", "2"), placement("job-2-0", "2"))  # any write prunes
    assert [s.task_id for s in backend.task_statuses()] == ["job-2-0"]


def test_logs_tell_what_the_task_did(backend: SimulatedBackend, clock: FakeClock) -> None:
    backend.bind(spec(sim_duration_s=180.0), placement())
    clock.advance(100)
    logs = backend.logs("1", "job-1-0")
    assert "python train.py" in logs and "exited with code 0" in logs
    assert backend.logs("2", "job-1-0") == ""


def test_reset_forgets_every_task_and_ensure_state_creates_only_once(backend: SimulatedBackend) -> None:
    assert backend.ensure_state() is True
    assert backend.ensure_state() is False
    backend.bind(spec(), placement())
    backend.reset()
    assert backend.task_statuses() == []


def test_two_backend_objects_on_one_file_share_the_cluster(tmp_path: Path, clock: FakeClock) -> None:
    first = SimulatedBackend(tmp_path / "c.json", cluster="small", clock=clock)
    second = SimulatedBackend(tmp_path / "c.json", cluster="small", clock=clock)
    first.bind(spec(), placement())
    assert [s.task_id for s in second.task_statuses()] == ["job-1-0"]


def test_the_state_file_is_shared_between_processes_without_lost_writes(tmp_path: Path) -> None:
    state = tmp_path / "shared.json"
    # Each process binds 15 tiny tasks (1 milli-GPU, no CPU) concurrently with the others.
    script = textwrap.dedent(
        """
        import sys
        from scheduler.backends.base import TaskSpec
        from scheduler.backends.simulated import SimulatedBackend
        from scheduler.model import Placement

        path, worker = sys.argv[1], sys.argv[2]
        backend = SimulatedBackend(path, cluster="small")
        for i in range(15):
            tid = f"job-{worker}-{i}"
            backend.bind(
                TaskSpec(job_id=worker, task_id=tid),
                Placement(job_id=worker, task_id=tid, node="t4-1", gpu_indices=(i % 2,), gpu_milli=1),
            )
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(state), str(w)],
            cwd=REPO_ROOT,
            env={"PYTHONPATH": str(REPO_ROOT)},
        )
        for w in range(1, 5)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    backend = SimulatedBackend(state, cluster="small")
    assert len(backend.task_statuses()) == 60
    gpus = backend.snapshot().node("t4-1").gpus
    assert gpus[0].used_milli + gpus[1].used_milli == 60


def test_a_corrupt_state_file_is_reported_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text("{not json")
    with pytest.raises(PermanentBackendError, match="delete it to reset"):
        SimulatedBackend(path, cluster="small").snapshot()


def test_an_unknown_cluster_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'galaxy' not found \(shipped specs: .*demo.*small"):
        SimulatedBackend(tmp_path / "c.json", cluster="galaxy")

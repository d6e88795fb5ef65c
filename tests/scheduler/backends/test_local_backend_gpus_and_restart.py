"""The local backend: GPU environment, distributed jobs, inventory, surviving a platform restart,
vanished runners, and the Docker path without an engine."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from local_backend_helpers import (
    NODE,
    PY,
    finished,
    gate_command,
    make_backend,
    placement,
    running,
    spec,
    status,
    stop_everything,
    wait_for,
)

from scheduler.backends.base import PermanentBackendError, TaskPhase
from scheduler.backends.local import LocalBackend
from scheduler.backends.local import runner as files
from scheduler.backends.local.environment import mps_percentage, task_environment
from scheduler.backends.local.inventory import LABEL_VIRTUAL, memory_mib
from scheduler.backends.local.runner import group_alive

REPO = Path(__file__).resolve().parents[3]
ENV_PROBE = "import json, os; print(json.dumps({k: v for k, v in os.environ.items()}))"


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[LocalBackend]:
    backend = make_backend(tmp_path / "work")
    yield backend
    stop_everything(backend)


def _env_of(backend: LocalBackend, job: str, rank: int = 0) -> dict[str, str]:
    assert finished(backend, job, rank).phase is TaskPhase.SUCCEEDED
    return json.loads(backend.logs(job, f"job-{job}-{rank}"))


def _fake_nvml() -> ModuleType:
    path = REPO / "tests" / "agent" / "fake_nvml.py"
    module_spec = importlib.util.spec_from_file_location("local_backend_fake_nvml", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------- environment


def test_a_two_task_job_gives_each_task_its_rank_and_one_shared_master_port(backend: LocalBackend) -> None:
    for rank in (0, 1):
        backend.bind(
            spec("20", [PY, "-c", ENV_PROBE], rank=rank, world_size=2),
            placement("20", rank=rank, gpus=(rank,)),
        )

    env0, env1 = _env_of(backend, "20", 0), _env_of(backend, "20", 1)

    assert (env0["RANK"], env1["RANK"]) == ("0", "1")
    assert (env0["LOCAL_RANK"], env1["LOCAL_RANK"]) == ("0", "1")
    assert env0["WORLD_SIZE"] == env1["WORLD_SIZE"] == "2"
    assert env0["MASTER_ADDR"] == env1["MASTER_ADDR"] == "127.0.0.1"
    assert env0["MASTER_PORT"] == env1["MASTER_PORT"] and 0 < int(env0["MASTER_PORT"]) < 65536
    assert (env0["CUDA_VISIBLE_DEVICES"], env1["CUDA_VISIBLE_DEVICES"]) == ("0", "1")


def test_two_jobs_get_different_master_ports(backend: LocalBackend, tmp_path: Path) -> None:
    for job in ("21", "22"):
        for rank in (0, 1):
            backend.bind(
                spec(job, gate_command(tmp_path / "gate"), rank=rank, world_size=2),
                placement(job, rank=rank, gpus=(rank,), milli=250),
            )
    (tmp_path / "gate").touch()
    ports = {
        job: {
            json.loads((backend.task_dir(job, f"job-{job}-{r}") / files.TASK_FILE).read_text())["master_port"]
            for r in (0, 1)
        }
        for job in ("21", "22")
    }
    assert len(ports["21"]) == len(ports["22"]) == 1
    assert ports["21"] != ports["22"]


def test_a_single_task_job_gets_no_rendezvous_variables(backend: LocalBackend) -> None:
    backend.bind(spec("23", [PY, "-c", ENV_PROBE]), placement("23"))

    env = _env_of(backend, "23")

    assert not {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"} & env.keys()
    assert env["CUDA_VISIBLE_DEVICES"] == env["NVIDIA_VISIBLE_DEVICES"] == "0"
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env  # a whole GPU is not capped


def test_two_fractional_jobs_share_one_gpu_with_their_own_mps_shares(
    backend: LocalBackend, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    probe = gate_command(gate, then=ENV_PROBE)
    backend.bind(spec("24", probe), placement("24", gpus=(1,), milli=250, memory=4096))
    backend.bind(spec("25", probe), placement("25", gpus=(1,), milli=333))
    running(backend, "24"), running(backend, "25")

    gpu = backend.snapshot().nodes[0].gpus[1]
    assert (gpu.used_milli, gpu.used_memory_mib, sorted(gpu.tenants)) == (583, 4096, ["job-24-0", "job-25-0"])
    gate.touch()
    a, b = _env_of(backend, "24"), _env_of(backend, "25")

    assert a["CUDA_VISIBLE_DEVICES"] == b["CUDA_VISIBLE_DEVICES"] == "1"
    assert (a["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], b["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"]) == ("25", "34")
    assert a["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"  # ordinal 0 = the one device the task sees
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" not in b
    assert (a["GPU_PLATFORM_GPU_INDICES"], a["GPU_PLATFORM_GPU_UUIDS"]) == ("1", "virtual-1")


@pytest.mark.parametrize(("milli", "percent"), [(1, 1), (5, 1), (10, 1), (11, 2), (250, 25), (999, 100)])
def test_the_mps_percentage_is_milli_over_10_rounded_up_and_at_least_1(milli: int, percent: int) -> None:
    assert mps_percentage(milli) == percent


def test_platform_variables_win_over_the_users(backend: LocalBackend) -> None:
    env = task_environment(
        spec("26", ["x"], rank=1, world_size=2, env={"RANK": "7", "MY_FLAG": "1"}),
        placement("26", rank=1),
        uuids={0: "virtual-0"},
        master_port=1234,
        source={"PATH": "/bin", "DATABASE_URL": "postgres://secret", "LC_ALL": "C"},
    )

    assert (env["RANK"], env["MY_FLAG"], env["MASTER_PORT"]) == ("1", "1", "1234")
    assert (env["PATH"], env["LC_ALL"]) == ("/bin", "C") and "DATABASE_URL" not in env


def test_in_a_container_cuda_numbers_the_assigned_gpus_from_zero() -> None:
    env = task_environment(
        spec("27", ["x"]), placement("27", gpus=(2, 3)), uuids={}, master_port=None, container=True, source={}
    )

    assert (env["CUDA_VISIBLE_DEVICES"], env["NVIDIA_VISIBLE_DEVICES"]) == ("0,1", "2,3")


# ----------------------------------------------------------------------------- inventory


def test_without_a_driver_the_node_has_virtual_gpus_clearly_marked(tmp_path: Path) -> None:
    fake = _fake_nvml()
    backend = make_backend(
        tmp_path,
        gpu_mode="auto",
        nvml=fake.FakeNvml({}, driver_loaded=False),
        virtual_gpus=3,
        virtual_gpu_model="Demo GPU",
        virtual_gpu_memory_mib=8192,
    )

    node = backend.snapshot().nodes[0]

    assert node.name == NODE and node.labels[LABEL_VIRTUAL] == "true"
    assert [(g.index, g.uuid, g.model, g.memory_mib) for g in node.gpus] == [
        (i, f"virtual-{i}", "Demo GPU", 8192) for i in range(3)
    ]
    assert node.cpu_milli >= 1000 and node.memory_mib > 0


def test_with_a_driver_the_node_has_the_real_gpus_and_their_topology(tmp_path: Path) -> None:
    fake = _fake_nvml()
    nvml = fake.FakeNvml.load("nvml_dgx1_v100.json")
    backend = make_backend(tmp_path, gpu_mode="auto", nvml=nvml)

    node = backend.snapshot().nodes[0]

    assert node.labels[LABEL_VIRTUAL] == "false"
    assert len(node.gpus) == 8 and all(g.uuid.startswith("GPU-") for g in node.gpus)
    assert "V100" in node.gpu_model and node.gpus[0].memory_mib > 15000
    assert node.topology is not None and node.topology.gpu_count == 8
    assert node.driver_version and nvml.shutdowns >= 1


def test_requiring_nvml_without_a_driver_is_a_one_line_permanent_error(tmp_path: Path) -> None:
    fake = _fake_nvml()
    backend = make_backend(tmp_path, gpu_mode="nvml", nvml=fake.FakeNvml({}, driver_loaded=False))

    with pytest.raises(PermanentBackendError, match="no NVIDIA driver") as info:
        backend.snapshot()
    assert "\n" not in str(info.value)


def test_memory_comes_from_proc_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16384000 kB\nMemFree:         1000 kB\n")

    assert memory_mib(meminfo) == 16000
    assert memory_mib(tmp_path / "missing") == 0


# ----------------------------------------------------------------------------- restart and vanish


def test_after_a_platform_restart_a_running_task_is_reattached_and_seen_to_finish(tmp_path: Path) -> None:
    work, gate = tmp_path / "work", tmp_path / "gate"
    # The bind happens in another process that then exits, as a Celery worker would on restart.
    starter = (
        "import sys; sys.path.insert(0, 'tests/scheduler/backends')\n"
        "from local_backend_helpers import make_backend, placement, spec, gate_command\n"
        "from pathlib import Path\n"
        f"b = make_backend(Path({str(work)!r}))\n"
        f"b.bind(spec('30', gate_command(Path({str(gate)!r}), then='print(\"finished\")')), placement('30'))\n"
    )
    subprocess.run([PY, "-c", starter], cwd=REPO, check=True, timeout=60)
    backend = make_backend(work)  # a new backend object over the same folder: the restarted platform
    try:
        assert running(backend, "30").phase is TaskPhase.RUNNING
        assert [p.task_id for p in backend.snapshot().running] == ["job-30-0"]

        gate.touch()
        st = finished(backend, "30")

        assert (st.phase, st.exit_code) == (TaskPhase.SUCCEEDED, 0)
        assert backend.logs("30", "job-30-0") == "finished\n"
        assert backend.snapshot().running == []
    finally:
        stop_everything(backend)


def test_a_task_whose_runner_vanished_without_an_exit_record_fails_as_a_platform_fault(
    backend: LocalBackend, tmp_path: Path
) -> None:
    backend.bind(spec("31", gate_command(tmp_path / "never")), placement("31"))
    running(backend, "31")
    task_dir = backend.task_dir("31", "job-31-0")
    runner_pid = json.loads((task_dir / files.RUNNER_FILE).read_text())["pid"]
    pgid = json.loads((task_dir / files.STARTED_FILE).read_text())["pgid"]

    os.kill(runner_pid, signal.SIGKILL)  # as a reboot or an OOM kill of the runner would
    st = wait_for(lambda: (s := status(backend, "31")) and s.phase.finished and s, what="the vanish to show")

    assert (st.phase, st.failure_category, st.exit_code) == (TaskPhase.FAILED, "PLATFORM", None)
    assert "vanished" in st.message
    assert group_alive(pgid)  # the orphaned command still runs, until the job is deleted:
    backend.delete_job("31")
    wait_for(lambda: not group_alive(pgid), what="the orphaned command to be killed")


def test_after_a_platform_failure_and_a_delete_the_same_task_runs_again_on_the_same_gpus(
    backend: LocalBackend, tmp_path: Path
) -> None:
    """What a retry does: the same task id, the same placement, bound again after delete_job. It must
    run afresh (not be taken for a repeat of the bind that already happened)."""
    backend.bind(spec("32", gate_command(tmp_path / "never")), placement("32"))
    running(backend, "32")
    task_dir = backend.task_dir("32", "job-32-0")
    os.kill(json.loads((task_dir / files.RUNNER_FILE).read_text())["pid"], signal.SIGKILL)
    wait_for(lambda: (s := status(backend, "32")) and s.phase.finished, what="the vanish to show")
    backend.delete_job("32")

    backend.bind(spec("32", [PY, "-c", "print('second run')"]), placement("32"))

    st = finished(backend, "32")
    assert (st.phase, st.exit_code) == (TaskPhase.SUCCEEDED, 0)
    assert backend.logs("32", "job-32-0") == "second run\n"
    assert [s.task_id for s in backend.task_statuses("32")] == ["job-32-0"]
    [old_run] = list((task_dir.parent / ".attempts").iterdir())
    assert json.loads((old_run / files.RUNNER_FILE).read_text())["pid"] > 0  # the first run, archived


# ----------------------------------------------------------------------------- containers


def test_containers_required_without_a_docker_engine_is_a_one_line_error(tmp_path: Path) -> None:
    backend = make_backend(
        tmp_path, containers_mode="always", docker_host=f"unix://{tmp_path}/no-docker.sock"
    )

    with pytest.raises(PermanentBackendError, match="no Docker engine reachable at unix://") as info:
        backend.bind(spec("40", ["python", "-c", "pass"], image="gpu-platform/pytorch:2.3"), placement("40"))

    assert "\n" not in str(info.value)
    assert backend.task_statuses() == []


def test_in_auto_mode_without_a_docker_engine_the_task_runs_as_a_process(tmp_path: Path) -> None:
    backend = make_backend(tmp_path, containers_mode="auto", docker_host=f"unix://{tmp_path}/no-docker.sock")

    backend.bind(spec("41", [PY, "-c", "print('ran')"], image="gpu-platform/pytorch:2.3"), placement("41"))

    assert finished(backend, "41").phase is TaskPhase.SUCCEEDED
    assert backend.logs("41", "job-41-0") == "ran\n"

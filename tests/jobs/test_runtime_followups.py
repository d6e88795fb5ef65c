"""Runtime follow-ups: platform failures are retried, cancelled jobs end their Task rows, a stale
placement re-plans the job on every backend, and the local backend's settings are checked at start-up."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import WARNING
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from jobs import checks, scheduling, sync
from jobs.binding import job_bind, task_placement, task_spec
from jobs.models import Job, Task
from jobs.services import job_cancel
from jobs.states import JobStatus
from quotas.models import Quota
from scheduler.backends.base import TaskPhase, TaskSpec
from scheduler.backends.local import LocalBackend
from scheduler.backends.local import runner as files
from scheduler.backends.local.runner import group_alive
from scheduler.backends.simulated import SimulatedBackend
from scheduler.model import Placement
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    local_backend,
    researcher,
    sim,
    statuses,
    submit,
    team,
)

PY = sys.executable
PLATFORM_ONCE = {"SIM_FAIL_CATEGORY": "PLATFORM", "SIM_FAIL_ATTEMPTS": "1"}


def started(backend: Any, job: Job) -> Job:
    """Schedule and bind ``job``: it is STARTING on ``backend``."""
    scheduling.run_scheduling_cycle(backend=backend)
    assert job_bind(job_id=job.pk, backend=backend) == "bound"
    job.refresh_from_db()
    assert job.status == JobStatus.STARTING.value
    return job


def reasons(job: Job, status: JobStatus) -> list[str]:
    return list(job.events.filter(to_status=status.value).values_list("reason", flat=True))


# ----------------------------------------------------------------------------- retries (simulated)


def test_a_platform_failure_with_a_retry_left_requeues_the_job_and_the_retry_succeeds(
    sim: SimulatedBackend, clock, researcher, image, team
) -> None:
    job = started(
        sim, submit(researcher, image, gpus=1, max_retries=1, sim_duration_seconds=10, env=PLATFORM_ONCE)
    )
    clock.advance(100)

    result = sync.sync_status(backend=sim)

    job.refresh_from_db()
    assert (job.status, job.retries, job.failure_category) == (JobStatus.QUEUED.value, 1, "")
    assert result.transitions == [(job.pk, "REQUEUED"), (job.pk, "QUEUED")]
    [why] = reasons(job, JobStatus.REQUEUED)
    assert f"task job-{job.pk}-0 failed (PLATFORM)" in why and "retry 1 of 1" in why
    assert "retry 1 of 1 after a PLATFORM failure" in job.pending_reason
    assert sim.task_statuses(job_id=str(job.pk)) == []  # the failed run is gone from the cluster
    assert Quota.objects.get(team=team).used_gpu_milli == 0  # requeued: its next admission takes it again
    task = Task.objects.get(job=job)
    assert (task.phase, task.exit_code) == (TaskPhase.FAILED.value, None)

    started(sim, job)  # the next cycle places it afresh and binds the same task name again
    task = Task.objects.get(job=job)
    assert (task.phase, task.message, task.finished_at) == (TaskPhase.PENDING.value, "", None)
    clock.advance(100)
    sync.sync_status(backend=sim)

    job.refresh_from_db()
    assert (job.status, job.retries) == (JobStatus.SUCCEEDED.value, 1)
    assert statuses(job) == [
        "DRAFT", "SUBMITTED", "QUEUED", "ADMITTED", "STARTING", "REQUEUED",
        "QUEUED", "ADMITTED", "STARTING", "RUNNING", "SUCCEEDED",
    ]  # fmt: skip
    assert Quota.objects.get(team=team).used_gpu_milli == 0


def test_a_hardware_failure_is_retried_too(sim: SimulatedBackend, clock, researcher, image) -> None:
    env = {"SIM_FAIL_CATEGORY": "HARDWARE"}
    job = started(sim, submit(researcher, image, gpus=1, max_retries=2, sim_duration_seconds=10, env=env))
    clock.advance(100)
    sync.sync_status(backend=sim)
    job.refresh_from_db()
    assert (job.status, job.retries) == (JobStatus.QUEUED.value, 1)
    assert "after a HARDWARE failure" in job.pending_reason


def test_a_job_that_keeps_failing_for_the_platform_fails_after_its_last_retry(
    sim: SimulatedBackend, clock, researcher, image, team
) -> None:
    env = {"SIM_FAIL_CATEGORY": "PLATFORM"}  # every run fails
    job = submit(researcher, image, gpus=1, max_retries=2, sim_duration_seconds=10, env=env)
    for run in range(3):
        started(sim, job)
        clock.advance(100)
        sync.sync_status(backend=sim)
        job.refresh_from_db()
        if run < 2:
            assert (job.status, job.retries) == (JobStatus.QUEUED.value, run + 1)

    assert (job.status, job.failure_category, job.retries) == (JobStatus.FAILED.value, "PLATFORM", 2)
    assert "simulated PLATFORM failure" in job.failure_message
    assert [r.split("; ")[-1] for r in reasons(job, JobStatus.REQUEUED)] == [
        "a PLATFORM failure, retrying (retry 1 of 2)",
        "a PLATFORM failure, retrying (retry 2 of 2)",
    ]
    assert Quota.objects.get(team=team).used_gpu_milli == 0


def test_without_retries_a_platform_failure_fails_the_job(
    sim: SimulatedBackend, clock, researcher, image
) -> None:
    job = started(sim, submit(researcher, image, gpus=1, sim_duration_seconds=10, env=PLATFORM_ONCE))
    clock.advance(100)
    sync.sync_status(backend=sim)
    job.refresh_from_db()
    assert (job.status, job.failure_category, job.retries) == (JobStatus.FAILED.value, "PLATFORM", 0)
    assert "REQUEUED" not in statuses(job)


@pytest.mark.parametrize(
    ("spec", "category"),
    [
        ({"command": ["false"]}, "USER"),
        ({"env": {"SIM_EXIT_CODE": "137"}}, "OOM"),
        ({"max_runtime_seconds": 5}, "TIMEOUT"),
        ({"env": {"SIM_FAIL_CATEGORY": "IMAGE"}}, "IMAGE"),
        ({"env": {"SIM_FAIL_CATEGORY": "USER"}}, "USER"),
    ],
)
def test_failures_of_the_job_itself_are_never_retried(
    sim: SimulatedBackend, clock, researcher, image, spec: dict[str, Any], category: str
) -> None:
    job = started(sim, submit(researcher, image, gpus=1, max_retries=3, sim_duration_seconds=10, **spec))
    clock.advance(100)
    sync.sync_status(backend=sim)
    job.refresh_from_db()
    assert (job.status, job.failure_category, job.retries) == (JobStatus.FAILED.value, category, 0)
    assert "REQUEUED" not in statuses(job)


def _fail_replica_1(sim: SimulatedBackend, clock, job: Job, env: dict[str, str]) -> None:
    """Rebind replica 1 of a running 2-task job as a task that fails at once with ``env``."""
    sim.delete_job(str(job.pk))
    for task in job.tasks.all():
        spec = task_spec(job, task)
        if task.index == 1:
            spec.env.update(env)
            spec.sim_duration_s = 0.0
        sim.bind(spec, task_placement(job, task))
    clock.advance(20)


def test_a_gang_is_retried_whole_and_its_task_rows_are_replaced_by_the_next_placement(
    sim: SimulatedBackend, clock, researcher, image
) -> None:
    job = started(
        sim, submit(researcher, image, gpus=1, replicas=2, max_retries=1, sim_duration_seconds=1000)
    )
    clock.advance(20)
    sync.sync_status(backend=sim)
    _fail_replica_1(sim, clock, job, {"SIM_FAIL_CATEGORY": "PLATFORM"})

    sync.sync_status(backend=sim)

    job.refresh_from_db()
    assert (job.status, job.retries) == (JobStatus.QUEUED.value, 1)
    assert sim.task_statuses(job_id=str(job.pk)) == []  # the healthy replica was stopped too
    healthy, failed = Task.objects.filter(job=job).order_by("index")
    assert (healthy.phase, healthy.message) == (
        TaskPhase.FAILED.value,
        f"stopped: retrying the job after task job-{job.pk}-1 failed",
    )
    assert healthy.finished_at is not None
    assert failed.phase == TaskPhase.FAILED.value and "simulated PLATFORM failure" in failed.message

    scheduling.run_scheduling_cycle(backend=sim)
    rows = list(Task.objects.filter(job=job).order_by("index").values_list("name", "phase", "finished_at"))
    assert rows == [(f"job-{job.pk}-0", "PENDING", None), (f"job-{job.pk}-1", "PENDING", None)]


# ----------------------------------------------------------------------------- ended Task rows


def test_cancelling_a_running_job_ends_its_task_rows(sim: SimulatedBackend, clock, researcher, image) -> None:
    job = started(sim, submit(researcher, image, gpus=1, replicas=2, sim_duration_seconds=1000))
    clock.advance(20)
    sync.sync_status(backend=sim)
    assert set(Task.objects.filter(job=job).values_list("phase", flat=True)) == {"RUNNING"}

    job_cancel(job=Job.objects.get(pk=job.pk), user=researcher)
    assert sync.job_stop(job_id=job.pk, backend=sim)

    rows = Task.objects.filter(job=job)
    assert {(t.phase, t.exit_code, t.message) for t in rows} == {("FAILED", None, sync.CANCELLED_MESSAGE)}
    assert all(t.finished_at is not None and t.started_at is not None for t in rows)


def test_cancelling_an_admitted_job_ends_its_pending_task_rows(
    sim: SimulatedBackend, researcher, image
) -> None:
    job = submit(researcher, image, gpus=1)
    scheduling.run_scheduling_cycle(backend=sim)
    job_cancel(job=Job.objects.get(pk=job.pk), user=researcher)

    sync.sync_status(backend=sim)  # finishes the stop (as if its message was lost)

    assert Job.objects.get(pk=job.pk).status == JobStatus.STOPPED.value
    task = Task.objects.get(job=job)
    assert (task.phase, task.message) == ("FAILED", sync.CANCELLED_MESSAGE) and task.finished_at


def test_a_job_cancelled_while_requeued_has_its_old_task_rows_ended_by_the_next_sync(
    sim: SimulatedBackend, researcher, image
) -> None:
    job = submit(researcher, image, gpus=2)
    scheduling.run_scheduling_cycle(backend=sim)
    intruder = Placement(job_id="x", task_id="intruder", node="t4-1", gpu_indices=(1,), gpu_milli=500)
    sim.bind(TaskSpec(job_id="x", task_id="intruder"), intruder)  # a GPU taken behind the scheduler's back
    assert job_bind(job_id=job.pk, backend=sim) == "requeued"
    job_cancel(job=Job.objects.get(pk=job.pk), user=researcher)  # QUEUED: straight to STOPPED
    assert Task.objects.get(job=job).phase == "PENDING"

    sync.sync_status(backend=sim)

    task = Task.objects.get(job=job)
    assert (task.phase, task.message) == ("FAILED", sync.CANCELLED_MESSAGE) and task.finished_at


def test_when_one_replica_fails_the_others_rows_say_they_were_stopped(
    sim: SimulatedBackend, clock, researcher, image
) -> None:
    job = started(sim, submit(researcher, image, gpus=1, replicas=2, sim_duration_seconds=1000))
    clock.advance(20)
    sync.sync_status(backend=sim)
    _fail_replica_1(sim, clock, job, {"SIM_EXIT_CODE": "3"})

    sync.sync_status(backend=sim)

    assert Job.objects.get(pk=job.pk).status == JobStatus.FAILED.value
    healthy, failed = Task.objects.filter(job=job).order_by("index")
    assert (healthy.phase, healthy.message) == ("FAILED", f"stopped: task job-{job.pk}-1 failed")
    assert (failed.phase, failed.exit_code) == ("FAILED", 3)


def test_finished_task_rows_are_left_as_they_ended(sim: SimulatedBackend, clock, researcher, image) -> None:
    job = started(sim, submit(researcher, image, gpu_milli=500, sim_duration_seconds=10))
    clock.advance(100)
    sync.sync_status(backend=sim)
    sync.sync_status(backend=sim)
    task = Task.objects.get(job=job)
    assert (task.phase, task.exit_code, task.message) == ("SUCCEEDED", 0, "completed")


def test_a_job_the_cluster_refused_has_its_task_rows_ended(sim: SimulatedBackend, researcher, image) -> None:
    job = submit(researcher, image, gpus=1)
    scheduling.run_scheduling_cycle(backend=sim)
    Task.objects.filter(job=job).update(node="decommissioned")
    assert job_bind(job_id=job.pk, backend=sim) == "failed"
    task = Task.objects.get(job=job)
    assert task.phase == "FAILED" and task.message.startswith("stopped: the cluster refused the job")


# ----------------------------------------------------------------------------- the local backend


@pytest.fixture
def local(tmp_path: Path, settings: Any) -> Iterator[LocalBackend]:
    yield from local_backend(settings, tmp_path, virtual_gpus=2)


def _sync_until(backend: LocalBackend, job: Job, *states: JobStatus) -> Job:
    deadline = time.monotonic() + 20
    while True:
        sync.sync_status(backend=backend)
        job.refresh_from_db()
        if job.status in {s.value for s in states}:
            return job
        assert time.monotonic() < deadline, f"job stayed {job.status}"
        time.sleep(0.05)


def _wait(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _second_run_succeeds(marker: Path) -> list[str]:
    """A command whose first run leaves ``marker`` and waits forever; a later run prints and exits 0."""
    code = (
        "import os, sys, time\n"
        "if os.path.exists(sys.argv[1]):\n"
        "    print('second run on GPU', os.environ['CUDA_VISIBLE_DEVICES'])\n"
        "else:\n"
        "    open(sys.argv[1], 'w').close()\n"
        "    print('first run', flush=True)\n"
        "    time.sleep(600)\n"
    )
    return [PY, "-c", code, str(marker)]


def _kill_the_runner(backend: LocalBackend, job: Job) -> int:
    """SIGKILL the task's supervisor (as a reboot would); returns the command's process group."""
    task_dir = backend.task_dir(str(job.pk), job.tasks.get().name)
    _wait(lambda: files.read_json(task_dir / files.STARTED_FILE) is not None, "the command to start")
    pgid = int(json.loads((task_dir / files.STARTED_FILE).read_text())["pgid"])
    os.kill(int(json.loads((task_dir / files.RUNNER_FILE).read_text())["pid"]), signal.SIGKILL)
    return pgid


def test_on_the_local_backend_a_killed_supervisor_is_retried_and_the_rerun_succeeds(
    local: LocalBackend, tmp_path: Path, researcher, image, team
) -> None:
    command = _second_run_succeeds(tmp_path / "marker")
    job = started(local, submit(researcher, image, command=command, gpus=1, cpu_milli=100, max_retries=1))
    job = _sync_until(local, job, JobStatus.RUNNING)
    # The supervisor writes its start file before Python has run a line of the command; killing it
    # earlier would end the first run before it left the marker, and the rerun would wait forever.
    _wait((tmp_path / "marker").exists, "the first run to leave its marker")
    pgid = _kill_the_runner(local, job)

    job = _sync_until(local, job, JobStatus.QUEUED, JobStatus.FAILED)

    assert (job.status, job.retries) == (JobStatus.QUEUED.value, 1)
    [why] = reasons(job, JobStatus.REQUEUED)
    assert "(PLATFORM)" in why and "vanished" in why and "retry 1 of 1" in why
    _wait(lambda: not group_alive(pgid), "the first run's orphaned command to be killed")

    started(local, job)  # same task name, bound again after delete_job: a fresh run, not a no-op
    job = _sync_until(local, job, JobStatus.SUCCEEDED, JobStatus.FAILED)

    assert job.status == JobStatus.SUCCEEDED.value
    task = job.tasks.get()
    assert local.logs(str(job.pk), task.name) == f"second run on GPU {task.gpu_indices[0]}\n"
    assert Quota.objects.get(team=team).used_gpu_milli == 0


def test_on_the_local_backend_a_killed_supervisor_without_retries_fails_the_job(
    local: LocalBackend, tmp_path: Path, researcher, image
) -> None:
    command = _second_run_succeeds(tmp_path / "marker")
    job = started(local, submit(researcher, image, command=command, gpus=1, cpu_milli=100))
    job = _sync_until(local, job, JobStatus.RUNNING)
    pgid = _kill_the_runner(local, job)

    job = _sync_until(local, job, JobStatus.QUEUED, JobStatus.FAILED)

    assert (job.status, job.failure_category) == (JobStatus.FAILED.value, "PLATFORM")
    _wait(lambda: not group_alive(pgid), "the orphaned command to be killed")


def test_on_the_local_backend_a_task_still_running_elsewhere_sends_the_job_back_to_the_queue(
    local: LocalBackend, tmp_path: Path, researcher, image
) -> None:
    job = submit(researcher, image, command=[PY, "-c", "print('hi')"], gpus=1, cpu_milli=100)
    scheduling.run_scheduling_cycle(backend=local)
    job.refresh_from_db()
    task = job.tasks.get()
    elsewhere = task_placement(job, task)
    elsewhere.gpu_indices = (1 - task.gpu_indices[0],)
    stray = task_spec(job, task)
    stray.command, stray.args = [PY, "-c", "import time; time.sleep(600)"], []
    local.bind(stray, elsewhere)  # an earlier run of the same task, on the other GPU

    assert job_bind(job_id=job.pk, backend=local) == "requeued"

    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED.value and "already runs on GPUs" in job.pending_reason
    assert local.task_statuses(str(job.pk)) == []  # the stray run was deleted: the next bind is clean


# ----------------------------------------------------------------------------- Kubernetes


def test_on_kubernetes_a_pod_already_placed_elsewhere_sends_the_job_back_to_the_queue(
    sim: SimulatedBackend, researcher, image
) -> None:
    from scheduler.backends.kubernetes import KubernetesBackend
    from scheduler.backends.kubernetes import contract as c
    from tests.scheduler.backends.kube_emulator import PODS, add_node, running_emulator, serve_bindings

    job = submit(researcher, image, gpus=1)
    scheduling.run_scheduling_cycle(backend=sim)  # the decision: t4-1, one GPU
    job.refresh_from_db()
    task = job.tasks.get()
    # The same T4s as the simulated node the decision was made on: a whole GPU's placement holds its
    # memory, and the backend re-checks capacity at bind (a smaller GPU would refuse it first).
    gpus = [{"index": i, "uuid": f"GPU-{i}", "model": "T4", "memory_mib": 16384} for i in range(2)]
    with running_emulator() as emu:
        add_node(emu, "t4-1", annotations={c.NODE_ANN_GPUS: json.dumps(gpus)})
        serve_bindings(emu)
        kube = KubernetesBackend(
            emu.api_client(),
            namespace="gpu-jobs",
            scheduler_name="gpu-platform-scheduler",
            sleep=lambda s: None,
        )
        elsewhere = task_placement(job, task)
        elsewhere.gpu_indices = (1 - task.gpu_indices[0],)
        kube.bind(task_spec(job, task), elsewhere)  # a pod of an earlier attempt, on the other GPU

        assert job_bind(job_id=job.pk, backend=kube) == "requeued"

        live = [k for k, obj in emu.handler.objects.items() if k[0] == PODS and not obj.deleted]
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED.value and "already exists on t4-1" in job.pending_reason
    assert live == []  # deleted, so the next decision binds on a clean slate


# ----------------------------------------------------------------------------- start-up checks


@pytest.fixture
def local_settings(settings: Any, tmp_path: Path) -> Any:
    settings.CLUSTER_BACKEND = "local"
    settings.LOCAL_WORK_DIR = str(tmp_path / "tasks")
    settings.LOCAL_GPUS = "auto"
    settings.LOCAL_VIRTUAL_GPUS = 2
    settings.LOCAL_VIRTUAL_GPU_MODEL = "Virtual GPU"
    settings.LOCAL_VIRTUAL_GPU_MEMORY_MIB = 16384
    settings.LOCAL_CPU_MILLI = 0
    settings.LOCAL_MEMORY_MIB = 0
    settings.LOCAL_STOP_GRACE_SECONDS = 10.0
    settings.LOCAL_CONTAINERS = "auto"
    return settings


def test_the_local_backend_checks_pass_on_the_defaults(local_settings: Any) -> None:
    assert checks.check_local_backend() == []


@pytest.mark.parametrize(
    ("name", "value", "code", "text"),
    [
        ("LOCAL_GPUS", "cuda", "jobs.E010", "LOCAL_GPUS='cuda' is not a GPU mode"),
        ("LOCAL_VIRTUAL_GPUS", -1, "jobs.E011", "between 0 and 64, got -1"),
        ("LOCAL_VIRTUAL_GPUS", 1000, "jobs.E011", "between 0 and 64, got 1000"),
        ("LOCAL_VIRTUAL_GPU_MODEL", "  ", "jobs.E012", "a GPU model name"),
        ("LOCAL_VIRTUAL_GPU_MEMORY_MIB", 0, "jobs.E013", "must be positive, got 0"),
        ("LOCAL_CONTAINERS", "sometimes", "jobs.E014", "LOCAL_CONTAINERS='sometimes'"),
        ("LOCAL_CPU_MILLI", -1000, "jobs.E015", "LOCAL_CPU_MILLI must not be negative"),
        ("LOCAL_MEMORY_MIB", -1, "jobs.E015", "LOCAL_MEMORY_MIB must not be negative"),
        ("LOCAL_STOP_GRACE_SECONDS", -0.5, "jobs.E015", "LOCAL_STOP_GRACE_SECONDS must not be negative"),
    ],
)
def test_a_bad_local_setting_is_a_clear_start_up_error(
    local_settings: Any, name: str, value: Any, code: str, text: str
) -> None:
    setattr(local_settings, name, value)
    [error] = checks.check_local_backend()
    assert error.id == code and text in error.msg and error.hint


def test_a_work_dir_that_cannot_be_a_folder_is_an_error(local_settings: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    local_settings.LOCAL_WORK_DIR = str(blocker)
    [error] = checks.check_local_backend()
    assert (error.id, error.msg) == ("jobs.E016", f"LOCAL_WORK_DIR {blocker} exists and is not a folder")

    local_settings.LOCAL_WORK_DIR = str(blocker / "tasks")
    [error] = checks.check_local_backend()
    assert error.id == "jobs.E016" and "cannot be created" in error.msg


def test_virtual_mode_without_virtual_gpus_is_a_warning(local_settings: Any) -> None:
    local_settings.LOCAL_GPUS = "virtual"
    local_settings.LOCAL_VIRTUAL_GPUS = 0
    [warning] = checks.check_local_backend()
    assert (warning.id, warning.level) == ("jobs.W010", WARNING)


def test_requiring_nvml_on_a_machine_without_a_driver_is_an_error(local_settings: Any) -> None:
    from scheduler.backends.local.inventory import NoGpuDriver, gpu_inventory

    try:
        gpu_inventory(mode="nvml")
    except NoGpuDriver:
        pass
    else:
        pytest.skip("this machine has an NVIDIA driver: LOCAL_GPUS=nvml is valid here")
    local_settings.LOCAL_GPUS = "nvml"
    [error] = checks.check_local_backend()
    assert error.id == "jobs.E017" and error.msg.startswith("LOCAL_GPUS=nvml but no NVIDIA GPU is usable")


def test_local_settings_are_not_checked_for_another_backend(local_settings: Any) -> None:
    local_settings.CLUSTER_BACKEND = "simulated"
    local_settings.LOCAL_GPUS = "cuda"
    assert checks.check_local_backend() == []


def test_manage_py_check_stops_on_a_bad_local_setting(local_settings: Any) -> None:
    local_settings.LOCAL_CONTAINERS = "sometimes"
    with pytest.raises(SystemCheckError, match=r"jobs\.E014.*LOCAL_CONTAINERS='sometimes'"):
        call_command("check")

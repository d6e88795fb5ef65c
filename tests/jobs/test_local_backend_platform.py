"""The platform with CLUSTER_BACKEND=local: a submitted job really runs on this machine, its output
reaches the logs endpoint's selector, and cancel stops the process."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from jobs import checks, scheduling, selectors, sync
from jobs.binding import job_bind, task_spec
from jobs.cluster import cluster_view, get_backend
from jobs.models import Job, Task
from jobs.services import job_cancel
from jobs.states import JobStatus
from scheduler.backends.local import LocalBackend
from scheduler.backends.local.runner import group_alive, read_json
from tests.jobs.runtime_fixtures import image, local_backend, researcher, submit, team  # noqa: F401  (fixtures)

PY = sys.executable


@pytest.fixture
def local(tmp_path: Path, settings: Any) -> Any:
    yield from local_backend(settings, tmp_path, virtual_gpus=1)


def _started(backend: LocalBackend, job: Job) -> Job:
    scheduling.run_scheduling_cycle(backend=backend)
    assert job_bind(job_id=job.pk, backend=backend) == "bound"
    job.refresh_from_db()
    return job


def _sync_until(backend: LocalBackend, job: Job, *states: JobStatus) -> Job:
    deadline = time.monotonic() + 20
    while True:
        sync.sync_status(backend=backend)
        job.refresh_from_db()
        if job.status in {s.value for s in states}:
            return job
        assert time.monotonic() < deadline, f"job stayed {job.status}"
        time.sleep(0.05)


def test_a_quarter_gpu_job_prints_its_gpu_index_in_its_logs_and_succeeds(local, researcher, image) -> None:
    command = [PY, "-c", "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"]
    job = _started(
        local, submit(researcher, image, command=command, gpu_milli=250, cpu_milli=100, memory_mib=64)
    )
    task = job.tasks.get()
    assert (task.node, task.gpu_indices) == ("lab-server", [0])

    job = _sync_until(local, job, JobStatus.SUCCEEDED, JobStatus.FAILED)

    assert job.status == JobStatus.SUCCEEDED.value
    logs = selectors.job_logs(job=job)
    assert [(entry["task"], entry["log"]) for entry in logs] == [(task.name, "0\n")]


def test_a_job_that_exits_3_fails_as_the_users_fault(local, researcher, image) -> None:
    job = _started(local, submit(researcher, image, command=[PY, "-c", "raise SystemExit(3)"], cpu_milli=100))

    job = _sync_until(local, job, JobStatus.SUCCEEDED, JobStatus.FAILED)

    assert (job.status, job.failure_category) == (JobStatus.FAILED.value, "USER")
    assert job.tasks.get().exit_code == 3


def test_cancelling_a_running_job_stops_its_process(local, researcher, image) -> None:
    command = [PY, "-c", "import time; print('working', flush=True); time.sleep(60)"]
    job = _started(local, submit(researcher, image, command=command, gpus=1, cpu_milli=100))
    job = _sync_until(local, job, JobStatus.RUNNING)
    task = job.tasks.get()
    pgid = read_json(local.task_dir(str(job.pk), task.name) / "started.json")["pgid"]

    job_cancel(job=job, user=researcher)
    assert sync.job_stop(job_id=job.pk, backend=local)

    job.refresh_from_db()
    assert job.status == JobStatus.STOPPED.value
    deadline = time.monotonic() + 10
    while group_alive(pgid):
        assert time.monotonic() < deadline, "the cancelled job's process is still running"
        time.sleep(0.05)
    assert "working" in selectors.job_logs(job=job)[0]["log"]


def test_the_cluster_view_marks_a_node_without_a_driver_as_virtual(local) -> None:
    view = cluster_view(local)

    assert view["backend"] == "local"
    [node] = view["nodes"]
    assert node["name"] == "lab-server" and node["virtual"] is True
    assert [g["uuid"] for g in node["gpus"]] == ["virtual-0"]


# ----------------------------------------------------------------------------- checkpoints, isolation


def test_the_first_run_does_not_resume_and_gets_the_platforms_default_grace(
    local, researcher, image, settings
) -> None:
    settings.PREEMPTION_GRACE_SECONDS = 17
    job = _started(local, submit(researcher, image, command=[PY, "-c", "pass"], cpu_milli=100))

    spec = task_spec(job, job.tasks.get())

    assert (spec.resume, spec.grace_seconds, spec.checkpoint_dir) == (False, 17.0, "")


def test_every_run_after_a_preemption_or_a_retry_resumes_with_the_jobs_own_grace(researcher, image) -> None:
    job = submit(researcher, image, command=[PY, "-c", "pass"], preemption_grace_seconds=90)
    task = Task(job=job, index=0, name=f"job-{job.pk}-0")
    for counter in ("preemptions", "retries", "migrations"):
        setattr(job, counter, 1)
        spec = task_spec(job, task)
        setattr(job, counter, 0)
        assert (spec.resume, spec.grace_seconds) == (True, 90.0), counter


@pytest.mark.skipif(os.geteuid() != 0, reason="the platform switches users only as root")
def test_as_root_the_platform_runs_a_submitted_job_as_a_uid_of_its_own(
    local, researcher, image, settings
) -> None:
    site = Path(tempfile.mkdtemp(prefix="gpu-platform-site-", dir="/tmp"))
    try:
        os.chmod(site, 0o755)
        settings.LOCAL_WORK_DIR = str(site / "var-jobs")
        settings.LOCAL_JOB_USER = "nobody"
        settings.LOCAL_JOB_UID_RANGE = "3200000-3200009"
        backend = get_backend()
        job = _started(
            backend,
            submit(
                researcher, image, command=["python", "-c", "import os; print(os.getuid())"], cpu_milli=100
            ),
        )

        job = _sync_until(backend, job, JobStatus.SUCCEEDED, JobStatus.FAILED)

        assert job.status == JobStatus.SUCCEEDED.value, selectors.job_logs(job=job)
        assert 3200000 <= int(selectors.job_logs(job=job)[0]["log"]) <= 3200009
    finally:
        shutil.rmtree(site, ignore_errors=True)


def _isolation_messages(settings: Any, **values: Any) -> list[tuple[str, str, str]]:
    settings.CLUSTER_BACKEND = "local"
    for name, value in values.items():
        setattr(settings, name, value)
    return [(type(m).__name__, m.id or "", m.msg) for m in checks.check_local_isolation()]


def test_without_a_job_user_development_starts_with_a_one_line_warning(settings: Any) -> None:
    [(kind, code, message)] = _isolation_messages(settings, LOCAL_JOB_USER="", LOCAL_TRUSTED_USERS=False)

    assert (kind, code) == ("Warning", "jobs.W011")
    assert "only trusted users may submit jobs" in message and "\n" not in message


def test_without_a_job_user_production_refuses_the_local_backend_unless_users_are_trusted(
    settings: Any,
) -> None:
    refused = _isolation_messages(
        settings, LOCAL_JOB_USER="", LOCAL_TRUSTED_USERS=False, LOCAL_ISOLATION_REQUIRED=True
    )
    trusted = _isolation_messages(
        settings, LOCAL_JOB_USER="", LOCAL_TRUSTED_USERS=True, LOCAL_ISOLATION_REQUIRED=True
    )

    [(kind, code, message)] = refused
    assert (kind, code) == ("Error", "jobs.E018") and "refusing to start" in message and "\n" not in message
    assert trusted == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the job user checks apply when the platform is root")
def test_as_root_a_missing_job_user_a_bad_uid_range_and_a_work_dir_inside_var_are_errors(
    settings: Any, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path / "var"
    messages = _isolation_messages(
        settings,
        LOCAL_JOB_USER="no-such-user-gpu-platform",
        LOCAL_JOB_UID_RANGE="10-5",
        LOCAL_WORK_DIR=str(tmp_path / "var" / "local-tasks"),
    )

    assert {code for _, code, _ in messages} >= {"jobs.W012", "jobs.E020", "jobs.E021"}
    assert ("Warning", "jobs.W012") in {(kind, code) for kind, code, _ in messages}  # development
    settings.LOCAL_ISOLATION_REQUIRED = True
    assert ("Error", "jobs.E019") in {(type(m).__name__, m.id) for m in checks.check_local_isolation()}


@pytest.mark.skipif(os.geteuid() != 0, reason="the job user checks apply when the platform is root")
def test_as_root_the_defaults_with_an_existing_job_user_pass(settings: Any) -> None:
    messages = _isolation_messages(settings, LOCAL_JOB_USER="nobody", REDIS_URL="")
    # jobs.W013 depends on the database the suite runs on (a password-less local PostgreSQL).
    assert [m for m in messages if m[1] != "jobs.W013"] == [], settings.LOCAL_WORK_DIR


@pytest.mark.skipif(os.geteuid() != 0, reason="the job user checks apply when the platform is root")
def test_as_root_a_password_less_local_redis_is_reported_as_open_to_jobs(settings: Any) -> None:
    open_redis = _isolation_messages(settings, LOCAL_JOB_USER="nobody", REDIS_URL="redis://127.0.0.1:6379/0")
    guarded = _isolation_messages(settings, LOCAL_JOB_USER="nobody", REDIS_URL="redis://:pw@127.0.0.1:6379/0")

    assert any(code == "jobs.W013" and "Redis" in message for _, code, message in open_redis)
    assert not any("Redis" in message for _, _, message in guarded)


CHECKPOINT_LOOP = (
    Path(__file__).resolve().parents[2] / "images" / "dockerfiles" / "base" / "checkpoint_test.py"
)


def _log_steps(job: Job) -> list[int]:
    logs = selectors.job_logs(job=job)
    return (
        [int(line.split()[1]) for line in logs[0]["log"].splitlines() if line.startswith("step ")]
        if logs
        else []
    )


def test_a_preempted_job_is_requeued_and_its_next_run_resumes_from_its_checkpoint(
    local, researcher, image
) -> None:
    loop = [PY, str(CHECKPOINT_LOOP), "--steps", "60", "--step-seconds", "0.05", "--every", "5"]
    job = _started(local, submit(researcher, image, command=loop, gpus=1, cpu_milli=100))
    job = _sync_until(local, job, JobStatus.RUNNING)
    deadline = time.monotonic() + 20
    while not any(step >= 10 for step in _log_steps(job)):
        assert time.monotonic() < deadline, "the loop did not reach step 10"
        time.sleep(0.05)

    # What the cycle does with an eviction of the decision (the policy's choice is tested elsewhere).
    assert scheduling._preempt(local, job, rule="test", preemptor=None, reason="make room")
    job = _sync_until(local, job, JobStatus.QUEUED)
    first_log = selectors.job_logs(job=job)[0]["log"]
    saved = int(first_log.split("checkpoint saved at step ")[1].split()[0])

    job = _started(local, job)
    assert task_spec(job, job.tasks.get()).resume
    job = _sync_until(local, job, JobStatus.SUCCEEDED, JobStatus.FAILED)

    assert job.status == JobStatus.SUCCEEDED.value
    assert job.preemptions == 1
    log = selectors.job_logs(job=job)[0]["log"]
    assert saved >= 10 and f"resumed from step {saved}" in log and "done: 60 steps" in log
    assert min(_log_steps(job)) == saved + 1  # no step of the first run was done again


@pytest.mark.parametrize(
    ("value", "ok"), [("", True), ("pvc:ckpt", True), ("hostPath:/data", True), ("nfs:x", False)]
)
def test_a_malformed_kubernetes_checkpoint_volume_is_a_start_up_error(
    settings: Any, value: str, ok: bool
) -> None:
    settings.CLUSTER_BACKEND = "kubernetes"
    settings.KUBERNETES_CHECKPOINT_VOLUME = value

    messages = checks.check_kubernetes_checkpoint_volume()

    assert (messages == []) is ok
    assert ok or [m.id for m in messages] == ["jobs.E023"]

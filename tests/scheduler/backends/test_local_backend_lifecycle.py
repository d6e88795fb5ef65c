"""The local backend runs real subprocesses: exit codes, categories, timeouts, cancel, logs."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_backend_helpers import (
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

from scheduler.backends.base import (
    PermanentBackendError,
    PlacementConflictError,
    TaskPhase,
    TransientBackendError,
)
from scheduler.backends.local import LocalBackend
from scheduler.backends.local import runner as files
from scheduler.backends.local.runner import group_alive


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[LocalBackend]:
    backend = make_backend(tmp_path / "work")
    yield backend
    stop_everything(backend)


def _started(backend: LocalBackend, job: str, rank: int = 0) -> dict:
    info = files.read_json(backend.task_dir(job, f"job-{job}-{rank}") / files.STARTED_FILE)
    assert info is not None
    return info


def test_a_task_that_prints_and_exits_0_succeeds_with_its_output_in_the_log(backend: LocalBackend) -> None:
    backend.bind(spec("1", [PY, "-c", "print(42)"]), placement("1"))

    st = finished(backend, "1")

    assert (st.phase, st.exit_code, st.failure_category) == (TaskPhase.SUCCEEDED, 0, "")
    assert st.node == "testnode" and st.gpu_indices == (0,)
    assert st.started_at is not None and st.finished_at is not None and st.finished_at >= st.started_at
    assert backend.logs("1", "job-1-0") == "42\n"


def test_a_task_that_exits_3_fails_with_category_user_and_exit_code_3(backend: LocalBackend) -> None:
    backend.bind(
        spec("2", [PY, "-c", "import sys; print('bad input', file=sys.stderr); sys.exit(3)"]), placement("2")
    )

    st = finished(backend, "2")

    assert (st.phase, st.exit_code, st.failure_category) == (TaskPhase.FAILED, 3, "USER")
    assert "code 3" in st.message
    assert "bad input" in backend.logs("2", "job-2-0")  # stderr is captured too


def test_a_task_over_its_max_runtime_is_killed_and_fails_with_timeout(
    backend: LocalBackend, tmp_path: Path
) -> None:
    backend.bind(spec("3", gate_command(tmp_path / "never"), max_runtime_s=1), placement("3"))
    pgid = wait_for(lambda: files.read_json(backend.task_dir("3", "job-3-0") / files.STARTED_FILE))["pgid"]

    st = finished(backend, "3")

    assert (st.phase, st.failure_category) == (TaskPhase.FAILED, "TIMEOUT")
    assert st.exit_code == 128 + signal.SIGTERM
    assert "maximum runtime of 1 s" in st.message
    assert "maximum runtime" in backend.logs("3", "job-3-0")
    assert not group_alive(pgid)


def test_a_cancelled_task_is_stopped_its_process_group_ends_and_it_is_forgotten(
    backend: LocalBackend, tmp_path: Path
) -> None:
    # A child process in the same group proves the whole group is signalled, not just the leader.
    command = [
        PY,
        "-c",
        "import subprocess, sys, time\nsubprocess.Popen(['sleep', '60'])\nprint('up', flush=True)\ntime.sleep(60)",
    ]
    backend.bind(spec("4", command), placement("4"))
    running(backend, "4")
    wait_for(lambda: "up" in backend.logs("4", "job-4-0"), what="the task to print")
    pgid = _started(backend, "4")["pgid"]
    assert backend.snapshot().nodes[0].gpus[0].used_milli == 1000

    backend.delete_job("4")

    assert status(backend, "4") is None  # forgotten at once, like a deleted pod
    wait_for(lambda: not group_alive(pgid), what="the process group to end")
    exit_facts = wait_for(lambda: files.read_json(backend.task_dir("4", "job-4-0") / files.EXIT_FILE))
    assert exit_facts["killed_by"] == "stop"
    assert "up" in backend.logs("4", "job-4-0")  # the log outlives the cancel
    assert backend.snapshot().running == []
    backend.delete_job("4")  # idempotent


def test_a_task_that_ignores_sigterm_is_killed_after_the_grace_period(backend: LocalBackend) -> None:
    command = [
        PY,
        "-c",
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(60)",
    ]
    backend.bind(spec("5", command), placement("5"))
    wait_for(lambda: "ready" in backend.logs("5", "job-5-0"), what="the task to ignore SIGTERM")
    pgid = _started(backend, "5")["pgid"]

    backend.delete_job("5")

    wait_for(lambda: not group_alive(pgid), what="SIGKILL after the grace period")
    exit_facts = wait_for(lambda: files.read_json(backend.task_dir("5", "job-5-0") / files.EXIT_FILE))
    assert exit_facts["signal"] == signal.SIGKILL and exit_facts["sent_sigkill"] is True
    assert "SIGKILL" in backend.logs("5", "job-5-0")


def test_a_task_killed_by_a_sigkill_the_platform_did_not_send_counts_as_oom(backend: LocalBackend) -> None:
    backend.bind(
        spec("6", [PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]), placement("6")
    )

    st = finished(backend, "6")

    assert (st.phase, st.exit_code, st.failure_category) == (TaskPhase.FAILED, 137, "OOM")


def test_cuda_out_of_memory_in_the_log_counts_as_oom(backend: LocalBackend) -> None:
    command = [
        PY,
        "-c",
        "import sys; print('RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB'); sys.exit(1)",
    ]
    backend.bind(spec("7", command), placement("7"))

    st = finished(backend, "7")

    assert (st.phase, st.exit_code, st.failure_category) == (TaskPhase.FAILED, 1, "OOM")


def test_a_command_that_does_not_exist_fails_as_the_users_error_with_exit_code_127(
    backend: LocalBackend,
) -> None:
    backend.bind(spec("8", ["no-such-command-xyz", "--flag"]), placement("8"))

    st = finished(backend, "8")

    assert (st.phase, st.exit_code, st.failure_category) == (TaskPhase.FAILED, 127, "USER")
    assert "no-such-command-xyz" in st.message and "command not found" in backend.logs("8", "job-8-0")


def test_arguments_reach_the_command_verbatim_without_a_shell(backend: LocalBackend, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    argument = f"$(touch {marker}); `touch {marker}` && echo hi > {marker}"
    backend.bind(spec("9", [PY, "-c", "import sys; print(sys.argv[1])"], args=[argument]), placement("9"))

    finished(backend, "9")

    assert backend.logs("9", "job-9-0") == argument + "\n"
    assert not marker.exists()


def test_binding_the_same_task_twice_runs_it_once(backend: LocalBackend) -> None:
    task = spec("10", [PY, "-c", "print('once')"])
    backend.bind(task, placement("10"))
    backend.bind(task, placement("10"))

    finished(backend, "10")
    backend.bind(task, placement("10"))  # a bind retried after the task already ended

    assert backend.logs("10", "job-10-0") == "once\n"
    assert len(backend.task_statuses("10")) == 1


def test_a_running_task_bound_again_to_other_gpus_is_a_placement_conflict(
    backend: LocalBackend, tmp_path: Path
) -> None:
    backend.bind(spec("11", gate_command(tmp_path / "gate11")), placement("11", gpus=(0,)))
    try:
        # A conflict (the platform re-plans the job), not a plain permanent error (it would fail it).
        with pytest.raises(PlacementConflictError, match="already runs on GPUs"):
            backend.bind(spec("11", gate_command(tmp_path / "gate11")), placement("11", gpus=(1,)))
    finally:
        (tmp_path / "gate11").touch()
    finished(backend, "11")


def test_a_deleted_task_bound_again_runs_afresh_once_the_old_run_has_stopped(
    backend: LocalBackend, tmp_path: Path
) -> None:
    backend.bind(spec("12", gate_command(tmp_path / "never12")), placement("12"))
    running(backend, "12")
    backend.delete_job("12")
    task_dir = backend.task_dir("12", "job-12-0")

    def rebound() -> bool:
        try:
            backend.bind(spec("12", [PY, "-c", "print('second run')"]), placement("12"))
        except TransientBackendError:
            return False  # the first run is still stopping: Celery would retry
        return True

    wait_for(rebound, what="the rebind to be accepted")

    assert finished(backend, "12").phase is TaskPhase.SUCCEEDED
    assert backend.logs("12", "job-12-0") == "second run\n"
    assert any((task_dir.parent / ".attempts").iterdir())  # the first run's folder is kept


def test_placements_that_overfill_a_gpu_are_refused_as_stale(backend: LocalBackend, tmp_path: Path) -> None:
    backend.bind(spec("13", gate_command(tmp_path / "gate13")), placement("13", gpus=(0,), milli=600))
    try:
        with pytest.raises(PlacementConflictError, match=r"GPU\(s\) \[0\]"):
            backend.bind(spec("14", [PY, "-c", "pass"]), placement("14", gpus=(0,), milli=500))
        backend.bind(spec("15", [PY, "-c", "pass"]), placement("15", gpus=(0,), milli=400))  # fits exactly
    finally:
        (tmp_path / "gate13").touch()
    assert finished(backend, "15").phase is TaskPhase.SUCCEEDED


def test_a_placement_on_another_node_or_gpu_is_refused(backend: LocalBackend) -> None:
    bad_node = placement("16")
    bad_node.node = "elsewhere"
    with pytest.raises(PermanentBackendError, match="only node is 'testnode'"):
        backend.bind(spec("16", [PY, "-c", "pass"]), bad_node)
    with pytest.raises(PermanentBackendError, match="has no GPU 7"):
        backend.bind(spec("16", [PY, "-c", "pass"]), placement("16", gpus=(7,)))
    assert backend.task_statuses("16") == []


def test_logs_of_an_unknown_task_are_empty(backend: LocalBackend) -> None:
    assert backend.logs("404", "job-404-0") == ""


def test_the_task_runs_in_its_own_working_folder_under_the_work_dir(backend: LocalBackend) -> None:
    backend.bind(spec("17", [PY, "-c", "import os; print(os.getcwd())"]), placement("17"))

    finished(backend, "17")

    assert backend.logs("17", "job-17-0").strip() == str(backend.task_dir("17", "job-17-0") / "work")


def test_the_task_does_not_inherit_the_platforms_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DJANGO_SECRET_KEY", "s3cret")
    backend = make_backend(tmp_path / "work")
    command = [PY, "-c", "import os; print(os.environ.get('DJANGO_SECRET_KEY'), os.environ['MY_SETTING'])"]
    backend.bind(spec("18", command, env={"MY_SETTING": "from-user"}), placement("18"))

    finished(backend, "18")

    assert backend.logs("18", "job-18-0") == "None from-user\n"


def test_a_cpu_only_task_sees_no_gpu(backend: LocalBackend) -> None:
    command = [
        PY,
        "-c",
        "import os; print(repr(os.environ['CUDA_VISIBLE_DEVICES']), os.environ['NVIDIA_VISIBLE_DEVICES'])",
    ]
    backend.bind(spec("19", command), placement("19", gpus=(), milli=0))

    finished(backend, "19")

    assert backend.logs("19", "job-19-0") == "'' void\n"
    assert os.path.isdir(backend.task_dir("19", "job-19-0"))


def test_logs_return_the_last_mib_and_say_where_the_rest_is(backend: LocalBackend) -> None:
    command = [
        PY,
        "-c",
        "import sys\nfor i in range(40000): sys.stdout.write(f'line {i:05d} ' + 'x' * 40 + '\\n')",
    ]
    backend.bind(spec("20", command), placement("20"))
    finished(backend, "20")

    text = backend.logs("20", "job-20-0")

    first, second = text.splitlines()[:2]
    assert "earlier output omitted" in first and str(backend.task_dir("20", "job-20-0")) in first
    assert second.startswith("line ") and len(second) == len("line 00000 ") + 40  # cut at a line start
    assert text.endswith("line 39999 " + "x" * 40 + "\n")
    assert len(text.encode()) <= 1024 * 1024 + len(first) + 1


def test_finished_task_folders_are_removed_after_the_retention(tmp_path: Path) -> None:
    backend = make_backend(tmp_path, finished_retention_s=0)
    backend.bind(spec("21", [PY, "-c", "pass"]), placement("21"))
    finished(backend, "21")

    backend.bind(spec("22", [PY, "-c", "pass"]), placement("22"))  # binds prune

    assert not backend.task_dir("21", "job-21-0").parent.exists()
    assert status(backend, "21") is None
    finished(backend, "22")


def test_a_missing_python_for_the_runner_is_a_permanent_error(tmp_path: Path) -> None:
    backend = make_backend(tmp_path, python=str(tmp_path / "no-python"))

    with pytest.raises(PermanentBackendError, match="cannot start its runner"):
        backend.bind(spec("23", [PY, "-c", "pass"]), placement("23"))

    assert backend.task_statuses() == []  # nothing half-bound is left behind

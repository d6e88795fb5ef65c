"""The checkpoint contract on the local backend (DESIGN.md §5b): every job has a CHECKPOINT_DIR kept
across its runs; preempt_job sends SIGTERM, waits the grace period, then SIGKILL; the next run of the
task gets RESUME=1 and the same folder. The standard images' checkpoint loop really runs here."""

from __future__ import annotations

import json
import re
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

from scheduler.backends.base import TaskPhase, TransientBackendError
from scheduler.backends.local import LocalBackend
from scheduler.backends.local import runner as files

REPO = Path(__file__).resolve().parents[3]
CHECKPOINT_LOOP = REPO / "images" / "dockerfiles" / "base" / "checkpoint_test.py"
PRINT_ENV = [
    PY,
    "-c",
    "import json, os; print(json.dumps({k: os.environ.get(k) for k in "
    "('CHECKPOINT_DIR', 'RESUME', 'PREEMPTION_GRACE_SECONDS', 'TMPDIR', 'LD_PRELOAD')}))",
]


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[LocalBackend]:
    backend = make_backend(tmp_path / "work")
    yield backend
    stop_everything(backend)


def _env_of(backend: LocalBackend, job: str) -> dict[str, str | None]:
    return json.loads(backend.logs(job, f"job-{job}-0").strip().splitlines()[-1])


def _loop(steps: int = 100_000) -> list[str]:
    return [PY, str(CHECKPOINT_LOOP), "--steps", str(steps), "--step-seconds", "0.02", "--every", "5"]


def _logged_step(backend: LocalBackend, job: str, at_least: int) -> int | None:
    steps = [int(m) for m in re.findall(r"^step (\d+)$", backend.logs(job, f"job-{job}-0"), re.M)]
    return steps[-1] if steps and steps[-1] >= at_least else None


def test_a_task_gets_its_jobs_checkpoint_dir_the_grace_and_a_private_tmpdir_but_no_resume_on_its_first_run(
    backend: LocalBackend,
) -> None:
    backend.bind(spec("1", PRINT_ENV, grace_seconds=45), placement("1"))
    finished(backend, "1")

    env = _env_of(backend, "1")
    assert env["CHECKPOINT_DIR"] == str(backend.checkpoint_dir("1"))
    assert Path(env["CHECKPOINT_DIR"] or "").is_dir()
    assert env["RESUME"] is None
    assert env["PREEMPTION_GRACE_SECONDS"] == "45"
    assert env["TMPDIR"] == str(backend.task_dir("1", "job-1-0") / files.TMP_DIR)
    assert Path(env["TMPDIR"] or "").is_dir()


def test_a_loader_variable_in_a_jobs_env_never_reaches_the_task(backend: LocalBackend) -> None:
    backend.bind(spec("2", PRINT_ENV, env={"LD_PRELOAD": "/tmp/evil.so"}), placement("2"))
    finished(backend, "2")

    assert _env_of(backend, "2")["LD_PRELOAD"] is None


def test_the_smoke_test_loop_preempted_mid_run_resumes_from_its_checkpoint_on_the_next_run(
    backend: LocalBackend,
) -> None:
    backend.bind(spec("3", _loop(), grace_seconds=10), placement("3"))
    wait_for(lambda: _logged_step(backend, "3", 12), what="the loop to pass step 12")

    backend.preempt_job("3", grace_seconds=10)

    st = finished(backend, "3")
    assert (st.phase, st.failure_category) == (TaskPhase.FAILED, "")
    assert st.message.startswith("preempted") and "SIGTERM" in st.message
    first_log = backend.logs("3", "job-3-0")
    assert "starting at step 0" in first_log
    saved = json.loads((backend.checkpoint_dir("3") / "state.json").read_text())["step"]
    assert saved >= 12 and f"checkpoint saved at step {saved}" in first_log

    backend.bind(spec("3", _loop(saved + 3), resume=True, grace_seconds=10), placement("3"))

    st = finished(backend, "3")
    assert st.phase is TaskPhase.SUCCEEDED
    log = backend.logs("3", "job-3-0")
    assert f"resumed from step {saved}" in log
    assert f"step {saved + 1}" in log and "step 1\n" not in log
    # The preempted run's folder (its log) is kept beside the new one.
    [archived] = (backend.task_dir("3", "job-3-0").parent / ".attempts").iterdir()
    assert "checkpoint saved" in (archived / files.LOG_FILE).read_text()


def test_a_task_that_ignores_sigterm_is_killed_when_its_grace_period_ends(
    backend: LocalBackend, tmp_path: Path
) -> None:
    stubborn = [
        PY,
        "-c",
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\n"
        "while True: time.sleep(0.05)",
    ]
    backend.bind(spec("4", stubborn), placement("4"))
    running(backend, "4")
    wait_for(lambda: "up" in backend.logs("4", "job-4-0"), what="the task to ignore SIGTERM")

    backend.preempt_job("4", grace_seconds=0.3)

    st = finished(backend, "4")
    assert st.message.startswith("preempted") and "SIGKILL" in st.message
    assert st.exit_code == 128 + signal.SIGKILL
    assert st.failure_category == ""  # the platform's own SIGKILL, not the OOM killer


def test_a_preempted_task_holds_its_gpu_and_blocks_its_next_run_until_it_has_stopped(
    backend: LocalBackend, tmp_path: Path
) -> None:
    gate = tmp_path / "checkpoint-written"
    # Ignores SIGTERM until the test lets it finish its "checkpoint": the grace window is the test's.
    slow = [
        PY,
        "-c",
        f"import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.02)",
    ]
    backend.bind(spec("5", slow), placement("5", gpus=(1,)))
    wait_for(lambda: "up" in backend.logs("5", "job-5-0"), what="the task to start")

    backend.preempt_job("5", grace_seconds=120)
    wait_for(lambda: "preempting" in backend.logs("5", "job-5-0"), what="the runner to send SIGTERM")

    assert backend.snapshot().nodes[0].gpus[1].used_milli == 1000
    with pytest.raises(TransientBackendError, match="still stopping"):
        backend.bind(spec("5", slow, resume=True), placement("5", gpus=(0,)))
    gate.touch()
    assert finished(backend, "5").message.startswith("preempted")
    assert backend.snapshot().nodes[0].gpus[1].used_milli == 0


def test_preempting_a_finished_job_or_an_unknown_one_changes_nothing(backend: LocalBackend) -> None:
    backend.bind(spec("6", [PY, "-c", "print('ok')"]), placement("6"))
    finished(backend, "6")

    backend.preempt_job("6", grace_seconds=1)
    backend.preempt_job("no-such-job", grace_seconds=1)

    st = status(backend, "6")
    assert st is not None and (st.phase, st.message) == (TaskPhase.SUCCEEDED, "completed")
    assert not (backend.task_dir("6", "job-6-0") / files.PREEMPT_FILE).exists()


def test_the_checkpoint_survives_a_deleted_run_and_goes_with_the_jobs_folder_after_retention(
    tmp_path: Path,
) -> None:
    backend = make_backend(tmp_path / "work", finished_retention_s=3600)
    write = [PY, "-c", "import os; open(os.path.join(os.environ['CHECKPOINT_DIR'], 'w.pt'), 'w').write('7')"]
    backend.bind(spec("7", write), placement("7"))
    finished(backend, "7")
    backend.delete_job("7")  # a retry: the platform deletes the run, then binds the task again
    backend.bind(spec("7", PRINT_ENV, resume=True), placement("7"))
    finished(backend, "7")
    assert (backend.checkpoint_dir("7") / "w.pt").read_text() == "7"
    assert _env_of(backend, "7")["RESUME"] == "1"

    later = make_backend(tmp_path / "work", finished_retention_s=0)
    later.bind(spec("8", [PY, "-c", "pass"]), placement("8"))  # binding prunes what retention allows

    assert not backend.checkpoint_dir("7").parent.exists()
    stop_everything(later)


def test_a_task_deleted_while_its_preemption_grace_runs_is_reported_as_stopped_not_preempted(
    backend: LocalBackend, tmp_path: Path
) -> None:
    backend.bind(spec("9", gate_command(tmp_path / "never")), placement("9"))
    running(backend, "9")

    backend.delete_job("9")
    backend.preempt_job("9", grace_seconds=5)

    wait_for(
        lambda: files.read_json(backend.task_dir("9", "job-9-0") / files.EXIT_FILE), what="the exit record"
    )
    assert not (backend.task_dir("9", "job-9-0") / files.PREEMPT_FILE).exists()
    assert status(backend, "9") is None  # deleted tasks are forgotten at once

"""Jobs on the local backend run as an unprivileged uid of their own (issue 18 §5): they cannot read the
platform's var/ folder, another job's folders, or a platform process's environment.

These tests really switch users, so they need root (the CI and development machines run as root);
elsewhere they skip. The job's commands run with the system Python, which every user may execute
(the test's own interpreter may live under /root)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_backend_helpers import finished, make_backend, placement, running, spec, stop_everything, wait_for

from scheduler.backends.base import PermanentBackendError, TaskPhase, TransientBackendError
from scheduler.backends.local import LocalBackend
from scheduler.backends.local import runner as files

JOB_PY = shutil.which("python3", path="/usr/bin:/bin") or ""
UIDS = (3_100_000, 3_100_099)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="switching to a job user needs root"),
    pytest.mark.skipif(not JOB_PY, reason="no system python3 in /usr/bin or /bin for the job user"),
]


@pytest.fixture
def site() -> Iterator[Path]:
    """A platform install the way `make run` lays it out as root: var/ private (0700), the task
    folders beside it under folders anyone may traverse. Not under pytest's tmp_path: that is 0700."""
    root = Path(tempfile.mkdtemp(prefix="gpu-platform-isolation-", dir="/tmp"))
    os.chmod(root, 0o755)
    (root / "var").mkdir(mode=0o700)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def backend(site: Path) -> Iterator[LocalBackend]:
    backend = make_backend(site / "var-jobs", job_user="nobody", job_uid_range=UIDS)
    yield backend
    stop_everything(backend)


def _probe(*paths: str | Path, listing: tuple[str | Path, ...] = ()) -> list[str]:
    """A job command that tries to read every path (and list every folder in ``listing``) and prints
    one JSON object: path -> "read" or the error's name."""
    code = (
        "import json, os, sys\n"
        "out = {}\n"
        f"for p in {[str(p) for p in paths]!r}:\n"
        "    try:\n"
        "        open(p, 'rb').read(); out[p] = 'read'\n"
        "    except OSError as e:\n"
        "        out[p] = type(e).__name__\n"
        f"for p in {[str(p) for p in listing]!r}:\n"
        "    try:\n"
        "        os.listdir(p); out[p] = 'listed'\n"
        "    except OSError as e:\n"
        "        out[p] = type(e).__name__\n"
        "print(json.dumps(out))\n"
    )
    return [JOB_PY, "-c", code]


def _result(backend: LocalBackend, job: str) -> dict[str, str]:
    st = finished(backend, job)
    assert st.phase is TaskPhase.SUCCEEDED, backend.logs(job, f"job-{job}-0")
    return json.loads(backend.logs(job, f"job-{job}-0").strip().splitlines()[-1])


def test_a_job_runs_as_an_unprivileged_uid_of_its_own_without_supplementary_groups(
    backend: LocalBackend,
) -> None:
    who = [JOB_PY, "-c", "import json, os; print(json.dumps([os.getuid(), os.geteuid(), os.getgroups()]))"]
    backend.bind(spec("1", who), placement("1"))
    backend.bind(spec("2", who), placement("2", gpus=(1,)))

    first = json.loads(finished(backend, "1") and backend.logs("1", "job-1-0"))
    second = json.loads(finished(backend, "2") and backend.logs("2", "job-2-0"))

    assert first[0] == first[1] and UIDS[0] <= first[0] <= UIDS[1]
    assert second[0] != first[0] and UIDS[0] <= second[0] <= UIDS[1]
    assert first[2] == [] and second[2] == []


def test_a_job_cannot_read_or_list_the_platforms_var_folder(backend: LocalBackend, site: Path) -> None:
    secret = site / "var" / "demo-credentials.json"
    secret.write_text('{"admin": "hunter2"}')
    os.chmod(secret, 0o644)  # as a file written with the default umask would be

    backend.bind(spec("3", _probe(secret, listing=(site / "var",))), placement("3"))

    assert _result(backend, "3") == {str(secret): "PermissionError", str(site / "var"): "PermissionError"}


def test_a_job_cannot_read_another_jobs_checkpoint_work_files_state_or_log(
    backend: LocalBackend, site: Path
) -> None:
    gate = site / "var-jobs" / "gate"  # only root can create it there: the test's "done" signal
    writer = [
        JOB_PY,
        "-c",
        "import os, time\n"
        "open(os.path.join(os.environ['CHECKPOINT_DIR'], 'model.pt'), 'w').write('weights')\n"
        "open('notes.txt', 'w').write('private')\n"
        "print('written', flush=True)\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.02)\n",
    ]
    backend.bind(spec("10", writer), placement("10"))
    wait_for(lambda: "written" in backend.logs("10", "job-10-0"), what="job 10 to write its files")
    task = backend.task_dir("10", "job-10-0")
    checkpoint = backend.checkpoint_dir("10")
    targets = [
        checkpoint / "model.pt",
        task / files.WORK_DIR / "notes.txt",
        task / files.TASK_FILE,
        task / files.LOG_FILE,
        backend.jobs_dir / "10" / "job.json",
    ]
    folders = (checkpoint, task, backend.jobs_dir, task / files.WORK_DIR)

    backend.bind(spec("11", _probe(*targets, listing=folders)), placement("11", gpus=(1,)))

    result = _result(backend, "11")
    assert result == {str(p): "PermissionError" for p in [*targets, *folders]}
    (gate).touch()
    assert finished(backend, "10").phase is TaskPhase.SUCCEEDED


def test_a_job_cannot_read_the_environment_of_a_platform_process_or_of_another_job(
    backend: LocalBackend, site: Path
) -> None:
    platform = subprocess.Popen(
        [JOB_PY, "-c", "import time; time.sleep(60)"],
        env={"DATABASE_URL": "postgres://root:secret@127.0.0.1/db", "PATH": "/usr/bin:/bin"},
    )
    gate = site / "var-jobs" / "gate"
    try:
        backend.bind(
            spec(
                "20",
                [JOB_PY, "-c", f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.02)"],
                env={"WANDB_API_KEY": "job-20-secret"},
            ),
            placement("20"),
        )
        running(backend, "20")
        other = files.read_json(backend.task_dir("20", "job-20-0") / files.STARTED_FILE)
        assert other is not None
        environs = [
            f"/proc/{platform.pid}/environ",
            f"/proc/{os.getpid()}/environ",
            f"/proc/{other['pid']}/environ",
        ]

        backend.bind(spec("21", _probe(*environs)), placement("21", gpus=(1,)))

        assert _result(backend, "21") == dict.fromkeys(environs, "PermissionError")
    finally:
        platform.kill()
        platform.wait()
        gate.touch()


def test_a_jobs_own_folders_belong_to_its_uid_and_nobody_else_may_enter_them(backend: LocalBackend) -> None:
    backend.bind(spec("30", [JOB_PY, "-c", "import os; print(os.getuid())"]), placement("30"))
    uid = int(finished(backend, "30") and backend.logs("30", "job-30-0"))
    task = backend.task_dir("30", "job-30-0")

    for folder in (task / files.WORK_DIR, task / files.TMP_DIR, backend.checkpoint_dir("30")):
        info = folder.stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (uid, 0o700), folder
    for state in (files.TASK_FILE, files.LOG_FILE, files.EXIT_FILE, files.STARTED_FILE):
        info = (task / state).stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600), state


def test_a_job_keeps_its_uid_across_runs_so_it_can_resume_from_its_own_checkpoint(
    backend: LocalBackend,
) -> None:
    step = [
        JOB_PY,
        "-c",
        "import os\np = os.path.join(os.environ['CHECKPOINT_DIR'], 'n')\n"
        "n = int(open(p).read()) if os.environ.get('RESUME') == '1' else 0\n"
        "open(p, 'w').write(str(n + 1)); print(n + 1, os.getuid())",
    ]
    backend.bind(spec("40", step), placement("40"))
    first = (finished(backend, "40") and backend.logs("40", "job-40-0")).split()
    backend.delete_job("40")
    backend.bind(spec("40", step, resume=True), placement("40"))
    second = (finished(backend, "40") and backend.logs("40", "job-40-0")).split()

    assert first[0] == "1" and second == ["2", first[1]]


def test_binding_refuses_a_work_folder_the_job_user_cannot_reach_in_one_line(site: Path) -> None:
    hidden = make_backend(site / "var" / "local-tasks", job_user="nobody", job_uid_range=UIDS)

    with pytest.raises(PermanentBackendError) as refused:
        hidden.bind(spec("50", [JOB_PY, "-c", "pass"]), placement("50"))

    message = str(refused.value)
    assert "\n" not in message and f"{site / 'var'} is mode 0700" in message


def test_binding_refuses_a_job_user_that_does_not_exist(site: Path) -> None:
    missing = make_backend(site / "var-jobs", job_user="no-such-user-gpu-platform")

    with pytest.raises(PermanentBackendError, match="does not exist; create it"):
        missing.bind(spec("60", [JOB_PY, "-c", "pass"]), placement("60"))


def test_a_job_user_finds_a_python_it_may_run_even_when_the_platforms_lives_in_a_private_home(
    backend: LocalBackend,
) -> None:
    which = ["python", "-c", "import os, sys; print(sys.executable); print(os.environ['PATH'])"]
    backend.bind(spec("70", which), placement("70"))

    st = finished(backend, "70")

    assert st.phase is TaskPhase.SUCCEEDED, backend.logs("70", "job-70-0")
    executable, path = backend.logs("70", "job-70-0").splitlines()[:2]
    assert not executable.startswith("/root/")
    assert all(not entry.startswith("/root/") for entry in path.split(os.pathsep))


def test_when_every_job_uid_is_taken_the_next_job_waits_instead_of_sharing_one(site: Path) -> None:
    backend = make_backend(site / "var-jobs", job_user="nobody", job_uid_range=(UIDS[0], UIDS[0]))
    try:
        backend.bind(spec("80", [JOB_PY, "-c", "pass"]), placement("80"))
        finished(backend, "80")

        with pytest.raises(TransientBackendError, match="job uids of LOCAL_JOB_UID_RANGE"):
            backend.bind(spec("81", [JOB_PY, "-c", "pass"]), placement("81", gpus=(1,)))
    finally:
        stop_everything(backend)

"""The throughput contract: the file and the log line a job reports its rate by, and the helper."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_backend_helpers import PY, gate_command, make_backend, placement, spec, stop_everything, wait_for

from scheduler.backends.base import TaskPhase
from scheduler.backends.local import LocalBackend
from scheduler.backends.throughput import (
    THROUGHPUT_ENV,
    parse_file_text,
    parse_log,
    read_file,
    reported_throughput,
)

HELPER_DIR = Path(__file__).resolve().parents[3] / "images" / "gpu_platform"


def test_the_log_parser_takes_the_last_well_formed_progress_line() -> None:
    log = "epoch 1\n[progress] throughput=10.5\nloss 0.3\n[progress] throughput=12\n[progress] throughput=oops\n"
    assert parse_log(log) == 12.0


def test_the_log_parser_ignores_progress_text_that_is_not_at_the_start_of_a_line() -> None:
    assert parse_log("note: [progress] throughput=99\n") is None


def test_the_log_parser_reads_lines_ended_by_carriage_returns_as_progress_bars_write_them() -> None:
    assert parse_log("[progress] throughput=3.5\r[progress] throughput=4.5\r") == 4.5


@pytest.mark.parametrize("bad", ["-1", "nan", "inf", "", "12 steps"])
def test_the_log_parser_refuses_negative_infinite_and_non_numeric_values(bad: str) -> None:
    assert parse_log(f"[progress] throughput={bad}\n") is None


def test_the_file_parser_takes_the_last_non_empty_line() -> None:
    assert parse_file_text("1.0\n2.5\n\n") == 2.5
    assert parse_file_text("\n") is None


def test_the_file_wins_over_the_log_and_the_log_is_the_fallback(tmp_path: Path) -> None:
    file = tmp_path / "tput"
    assert reported_throughput(file, "[progress] throughput=7\n") == 7.0
    file.write_text("8.25\n")
    assert reported_throughput(file, "[progress] throughput=7\n") == 8.25


def test_a_symlinked_or_special_throughput_file_is_not_read(tmp_path: Path) -> None:
    target = tmp_path / "secret"
    target.write_text("42\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_file(link) is None
    assert read_file(fifo) is None  # and it does not block


def _helper_module():
    spec_ = importlib.util.spec_from_file_location(
        "gpu_platform", HELPER_DIR / "gpu_platform" / "__init__.py"
    )
    assert spec_ is not None and spec_.loader is not None
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module


def test_the_helper_writes_the_file_the_platform_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    helper = _helper_module()
    file = tmp_path / "tput"
    monkeypatch.setenv(THROUGHPUT_ENV, str(file))
    helper.report_throughput(123.4)
    helper.report_throughput(150)
    assert read_file(file) == 150.0
    assert [p.name for p in tmp_path.iterdir()] == ["tput"]  # no temporary file left behind


def test_the_helper_prints_the_log_line_without_a_file(
    capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    helper = _helper_module()
    monkeypatch.delenv(THROUGHPUT_ENV, raising=False)
    helper.report_throughput(55.5)
    assert parse_log(capsys.readouterr().out) == 55.5


def test_the_helper_refuses_a_negative_value(monkeypatch) -> None:
    helper = _helper_module()
    monkeypatch.delenv(THROUGHPUT_ENV, raising=False)
    with pytest.raises(ValueError, match="finite number >= 0"):
        helper.report_throughput(-3)


def test_the_helper_package_stands_alone_with_no_dependency_on_the_platform(tmp_path: Path) -> None:
    import tomllib

    project = tomllib.loads((HELPER_DIR / "pyproject.toml").read_text())
    assert project["project"]["dependencies"] == []
    assert project["tool"]["setuptools"]["packages"] == ["gpu_platform"]
    file = tmp_path / "tput"
    # Only the helper's folder on the path, in a fresh interpreter outside the repository.
    subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import gpu_platform; "
            "gpu_platform.report_throughput(9.5)",
            str(HELPER_DIR),
        ],
        env={THROUGHPUT_ENV: str(file)},
        cwd=tmp_path,
        check=True,
    )
    assert read_file(file) == 9.5


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[LocalBackend]:
    backend = make_backend(tmp_path / "work")
    yield backend
    stop_everything(backend)


def _reported(backend: LocalBackend, job: str) -> float | None:
    for st in backend.task_statuses(job):
        if st.phase is TaskPhase.RUNNING and st.throughput is not None:
            return st.throughput
    return None


def test_a_local_task_that_writes_the_throughput_file_shows_it_in_its_status(
    backend: LocalBackend, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    write = (
        "import os\n"
        f"open(os.environ[{THROUGHPUT_ENV!r}], 'w').write('321.5\\n')\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.02)\n"
    )
    backend.bind(spec("t1", [PY, "-c", "import time\n" + write]), placement("t1"))
    assert wait_for(lambda: _reported(backend, "t1"), what="a reported throughput") == 321.5
    gate.touch()


def test_a_local_task_that_prints_the_progress_line_shows_it_in_its_status(
    backend: LocalBackend, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    command = gate_command(gate)
    command[2] = "print('[progress] throughput=12.5', flush=True)\n" + command[2]
    backend.bind(spec("t2", command), placement("t2"))
    assert wait_for(lambda: _reported(backend, "t2"), what="a reported throughput") == 12.5
    gate.touch()


def test_the_images_self_check_reads_back_what_it_reported_and_leaves_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    helper = _helper_module()
    monkeypatch.delenv(THROUGHPUT_ENV, raising=False)

    assert helper.self_check(42.0) == (True, "throughput reported to the platform: 42 steps/s")
    assert THROUGHPUT_ENV not in os.environ
    ok, why = helper.self_check(-1.0)
    assert not ok and "finite number >= 0" in why

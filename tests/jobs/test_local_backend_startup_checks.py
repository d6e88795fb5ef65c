"""The local backend's settings are checked at start-up: a bad one is a clear error, a doubtful one a
warning, and another backend's settings are not checked."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import WARNING
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from jobs import checks

PY = sys.executable
PLATFORM_ONCE = {"SIM_FAIL_CATEGORY": "PLATFORM", "SIM_FAIL_ATTEMPTS": "1"}


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

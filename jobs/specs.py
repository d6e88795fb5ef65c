"""The job spec a user submits, and its validation. Pure Python: no database, no Django.

Contract (DESIGN.md §4), shared by the REST API, the browser form and the CLI:

- ``gpus``: whole GPUs per replica, an integer >= 0; or ``gpu_milli``: a share (1..999 milli-GPU) of
  one GPU per replica, optionally with ``gpu_memory_mib``. The two are mutually exclusive: a job that
  sets ``gpu_milli`` leaves ``gpus`` at 0, and ``gpu_memory_mib`` only applies to a shared GPU.
  Neither means a CPU-only job.
- ``command``: a non-empty list of strings (the REST API also takes one string and splits it like a
  POSIX shell, see jobs.serializers.CommandField); ``args`` more strings appended to it.
- ``preemptible`` / ``min_runtime_seconds``: whether the policy may stop the job for another one, and
  not before its current run is this old; ``preemption_grace_seconds``: SIGTERM to SIGKILL (DESIGN.md
  §5b). ``allow_sharing``: a job of one whole GPU per replica that may be packed onto a share.
- ``env``: names match ``[A-Za-z_][A-Za-z0-9_]*``; names the platform sets itself are reserved, and
  loader variables (``scheduler.backends.base.is_loader_env``: LD_*, PYTHONSTARTUP, ...) refused.
- Every string and list has an upper bound, so one request cannot store megabytes.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from scheduler.backends.base import is_loader_env

MAX_NAME = 100
MAX_ARG = 4096
MAX_ARGS = 256
MAX_ENV = 128
MAX_ENV_VALUE = 4096
MAX_GPU_MODELS = 16
MAX_GPU_MODEL = 100
MAX_GPUS = 64
MAX_REPLICAS = 64
MAX_CPU_MILLI = 512_000
MAX_MEMORY_MIB = 4 * 1024 * 1024
MAX_GPU_MEMORY_MIB = 1024 * 1024
MAX_PRIORITY = 1000
MAX_RUNTIME_SECONDS = 30 * 24 * 3600
MAX_RETRIES = 10
MAX_SLOWDOWN_TOLERANCE = 100.0
MAX_SIM_DURATION_SECONDS = 365 * 24 * 3600.0
MAX_MIN_RUNTIME_SECONDS = MAX_RUNTIME_SECONDS
# An hour is far beyond any checkpoint write; more would let one job hold GPUs it was asked to free.
MAX_PREEMPTION_GRACE_SECONDS = 3600

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by the platform on every task (DESIGN.md §4); a user value would break GPU isolation.
RESERVED_ENV = re.compile(r"^(NVIDIA_VISIBLE_DEVICES|CUDA_VISIBLE_DEVICES|CUDA_MPS_\w*|GPU_PLATFORM_\w*)$")


# Inclusive bounds of the numeric fields, stated once: validate_job_spec checks them, and the API's
# input serializer (jobs.serializers) builds its bounded fields from this table: a pair of ints is an
# integer field, a pair of floats a number.
BOUNDS: dict[str, tuple[int, int] | tuple[float, float]] = {
    "gpus": (0, MAX_GPUS),
    "gpu_milli": (1, 999),
    "gpu_memory_mib": (0, MAX_GPU_MEMORY_MIB),
    "cpu_milli": (1, MAX_CPU_MILLI),
    "memory_mib": (1, MAX_MEMORY_MIB),
    "replicas": (1, MAX_REPLICAS),
    "priority": (-MAX_PRIORITY, MAX_PRIORITY),
    "max_runtime_seconds": (1, MAX_RUNTIME_SECONDS),
    "max_retries": (0, MAX_RETRIES),
    "slowdown_tolerance": (1.0, MAX_SLOWDOWN_TOLERANCE),
    # A millisecond: the simulated clock's resolution, and far below any real job.
    "sim_duration_seconds": (0.001, MAX_SIM_DURATION_SECONDS),
    "min_runtime_seconds": (0, MAX_MIN_RUNTIME_SECONDS),
    "preemption_grace_seconds": (0, MAX_PREEMPTION_GRACE_SECONDS),
    "workspace_port": (1024, 65535),
}
INT_BOUNDS: dict[str, tuple[int, int]] = {
    name: (int(low), int(high)) for name, (low, high) in BOUNDS.items() if isinstance(low, int)
}
FLOAT_BOUNDS: dict[str, tuple[float, float]] = {
    name: (float(low), float(high)) for name, (low, high) in BOUNDS.items() if isinstance(low, float)
}


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """What a job asks for. Defaults match jobs.models.Job."""

    name: str = ""
    command: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    gpus: int = 0
    gpu_milli: int | None = None
    gpu_memory_mib: int = 0
    gpu_models: list[str] = field(default_factory=list)
    cpu_milli: int = 1000
    memory_mib: int = 2048
    replicas: int = 1
    priority: int = 0
    max_runtime_seconds: int | None = None
    max_retries: int = 0
    slowdown_tolerance: float = 1.5
    sim_duration_seconds: float | None = None
    preemptible: bool = True
    min_runtime_seconds: int = 0
    allow_sharing: bool = False
    # None: the platform default (settings.PREEMPTION_GRACE_SECONDS).
    preemption_grace_seconds: int | None = None
    # batch, or workspace (issue 25: serves HTTP until stopped or culled; defaults in workspaces.spec).
    kind: str = "batch"
    workspace_app: str = ""
    workspace_port: int | None = None

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls))

    @classmethod
    def default_of(cls, name: str) -> Any:
        """The value a spec that leaves ``name`` out gets."""
        spec_field = next(f for f in fields(cls) if f.name == name)
        if spec_field.default_factory is not MISSING:
            return spec_field.default_factory()
        return spec_field.default


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value  # not NaN


def _number_between(value: object, low: float, high: float) -> bool:
    return _is_number(value) and low <= value <= high  # type: ignore[operator]


def _int_in(errors: dict[str, list[str]], name: str, value: object) -> None:
    low, high = INT_BOUNDS[name]
    if not _is_int(value):
        errors.setdefault(name, []).append("A valid integer is required.")
    elif not low <= value <= high:  # type: ignore[operator]
        errors.setdefault(name, []).append(f"Must be between {low} and {high}.")


def _strings(errors: dict[str, list[str]], name: str, value: object, *, max_items: int, max_len: int) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        errors.setdefault(name, []).append("Must be a list of strings.")
        return
    if len(value) > max_items:
        errors.setdefault(name, []).append(f"At most {max_items} items.")
    if any(len(item) > max_len for item in value):
        errors.setdefault(name, []).append(f"Each item may have at most {max_len} characters.")
    if any("\x00" in item for item in value):
        errors.setdefault(name, []).append("Items may not contain NUL characters.")


def validate_job_spec(spec: JobSpec) -> dict[str, list[str]]:
    """Every problem with ``spec``, as ``{field: [message, ...]}``; empty when the spec is valid."""
    errors: dict[str, list[str]] = {}
    if not isinstance(spec.name, str) or len(spec.name) > MAX_NAME or not spec.name.isprintable():
        errors["name"] = [f"A printable name of at most {MAX_NAME} characters is required."]

    _strings(errors, "command", spec.command, max_items=MAX_ARGS, max_len=MAX_ARG)
    if "command" not in errors and (not spec.command or not spec.command[0].strip()):
        errors["command"] = ['A non-empty command is required, e.g. ["python", "train.py"].']
    _strings(errors, "args", spec.args, max_items=MAX_ARGS, max_len=MAX_ARG)

    if not isinstance(spec.env, dict):
        errors["env"] = ["Must be an object mapping names to string values."]
    else:
        if len(spec.env) > MAX_ENV:
            errors.setdefault("env", []).append(f"At most {MAX_ENV} variables.")
        for key, value in spec.env.items():
            if not isinstance(key, str) or not ENV_NAME.match(key) or len(key) > 256:
                errors.setdefault("env", []).append(f"{str(key)[:60]!r} is not a valid variable name.")
            elif RESERVED_ENV.match(key):
                errors.setdefault("env", []).append(f"{key} is set by the platform and cannot be overridden.")
            elif is_loader_env(key):
                errors.setdefault("env", []).append(
                    f"{key} changes how programs are loaded and is not allowed "
                    "(LD_*, PYTHONSTARTUP, PYTHONHOME and others: see docs/local-backend.md)."
                )
            if not isinstance(value, str):
                errors.setdefault("env", []).append(f"The value of {str(key)[:60]!r} must be a string.")
            elif len(value) > MAX_ENV_VALUE or "\x00" in value:
                errors.setdefault("env", []).append(
                    f"The value of {key[:60]!r} must have at most {MAX_ENV_VALUE} characters and no NUL."
                )

    _int_in(errors, "gpus", spec.gpus)
    if spec.gpu_milli is not None:
        _int_in(errors, "gpu_milli", spec.gpu_milli)
        if _is_int(spec.gpus) and spec.gpus > 0:
            errors.setdefault("gpu_milli", []).append(
                "gpu_milli asks for a share of one GPU; it cannot be combined with gpus. "
                "Use gpus for whole GPUs or gpu_milli (1-999) for a share."
            )
    _int_in(errors, "gpu_memory_mib", spec.gpu_memory_mib)
    if "gpu_memory_mib" not in errors and spec.gpu_memory_mib and spec.gpu_milli is None:
        errors["gpu_memory_mib"] = ["gpu_memory_mib applies to a shared GPU only; set gpu_milli too."]
    _strings(errors, "gpu_models", spec.gpu_models, max_items=MAX_GPU_MODELS, max_len=MAX_GPU_MODEL)

    _int_in(errors, "cpu_milli", spec.cpu_milli)
    _int_in(errors, "memory_mib", spec.memory_mib)
    _int_in(errors, "replicas", spec.replicas)
    _int_in(errors, "priority", spec.priority)
    if spec.max_runtime_seconds is not None:
        _int_in(errors, "max_runtime_seconds", spec.max_runtime_seconds)
    _int_in(errors, "max_retries", spec.max_retries)
    low, high = FLOAT_BOUNDS["slowdown_tolerance"]
    if not _number_between(spec.slowdown_tolerance, low, high):
        errors["slowdown_tolerance"] = [f"A number between {low} and {high:g} is required."]
    low, high = FLOAT_BOUNDS["sim_duration_seconds"]
    if spec.sim_duration_seconds is not None and not _number_between(spec.sim_duration_seconds, low, high):
        errors["sim_duration_seconds"] = [f"A number of seconds from {low:g} to {high:g} is required."]
    for name in ("preemptible", "allow_sharing"):
        if not isinstance(getattr(spec, name), bool):
            errors[name] = ["Must be true or false."]
    _int_in(errors, "min_runtime_seconds", spec.min_runtime_seconds)
    if spec.preemption_grace_seconds is not None:
        _int_in(errors, "preemption_grace_seconds", spec.preemption_grace_seconds)
    errors.update(_workspace_errors(spec))
    if spec.allow_sharing is True and (spec.gpus != 1 or spec.gpu_milli is not None):
        errors.setdefault("allow_sharing", []).append(
            "allow_sharing applies to a job of exactly one whole GPU per replica (gpus: 1, no gpu_milli); "
            "for a share of a GPU ask for gpu_milli instead."
        )
    return errors


KINDS = ("batch", "workspace")
WORKSPACE_APPS = ("jupyterlab", "tensorboard", "http")


def _workspace_errors(spec: JobSpec) -> dict[str, list[str]]:
    """A workspace is one replica serving one declared port; a batch job declares neither."""
    if spec.kind not in KINDS:
        return {"kind": [f"One of: {', '.join(KINDS)}."]}
    errors: dict[str, list[str]] = {}
    if spec.kind == "batch":
        if spec.workspace_app:
            errors["workspace_app"] = ["Only a workspace (kind: workspace) has an app."]
        if spec.workspace_port is not None:
            errors["workspace_port"] = ["Only a workspace (kind: workspace) declares a port."]
        return errors
    if spec.workspace_app not in WORKSPACE_APPS:
        errors["workspace_app"] = [f"One of: {', '.join(WORKSPACE_APPS)}."]
    if spec.workspace_port is None:
        errors["workspace_port"] = ["A workspace declares the port it serves HTTP on."]
    else:
        _int_in(errors, "workspace_port", spec.workspace_port)
    if _is_int(spec.replicas) and spec.replicas != 1:
        errors["replicas"] = ["A workspace has exactly one replica."]
    return errors


def gpu_milli_per_replica(spec: JobSpec) -> int:
    return spec.gpus * 1000 if spec.gpus else (spec.gpu_milli or 0)

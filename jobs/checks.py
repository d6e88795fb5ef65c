"""System checks run at start-up (manage.py check, runserver, the worker): fail early, not mid-cycle."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

from jobs.cluster import KNOWN_BACKENDS


@register(Tags.compatibility, deploy=False)
def check_scheduler_profile(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """SCHEDULER_PROFILE must name a profile whose plugins all exist."""
    from scheduler.profiles import get_profile

    try:
        get_profile(settings.SCHEDULER_PROFILE).build()
    except ValueError as exc:
        return [Error(str(exc), hint="Set SCHEDULER_PROFILE to a known profile.", id="jobs.E001")]
    return []


MAX_CYCLE_SPACING_SECONDS = 60.0


@register(Tags.compatibility, deploy=False)
def check_scheduler_policy(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """SCHEDULER_POLICY must name a policy of scheduler.policy; the grace period and the cycle spacing
    must be sane."""
    from jobs.specs import MAX_PREEMPTION_GRACE_SECONDS
    from scheduler.policy import POLICY_NAMES

    errors: list[CheckMessage] = []
    if settings.SCHEDULER_POLICY not in POLICY_NAMES:
        errors.append(
            Error(
                f"unknown SCHEDULER_POLICY {settings.SCHEDULER_POLICY!r}",
                hint=f"Use one of: {', '.join(POLICY_NAMES)}.",
                id="jobs.E030",
            )
        )
    thresholds = list(settings.SCHEDULER_LAS_THRESHOLDS_GPU_S)
    if any(t <= 0 for t in thresholds) or thresholds != sorted(set(thresholds)):
        errors.append(
            Error(
                f"SCHEDULER_LAS_THRESHOLDS_GPU_S must be increasing positive GPU-seconds, got {thresholds}",
                hint="For example 3600,36000 (Tiresias' 1 and 10 GPU-h).",
                id="jobs.E032",
            )
        )
    if not settings.SCHEDULER_ROUND_SECONDS > 0:
        errors.append(
            Error(
                f"SCHEDULER_ROUND_SECONDS must be positive, got {settings.SCHEDULER_ROUND_SECONDS}",
                id="jobs.E033",
            )
        )
    spacing = settings.SCHEDULE_MIN_SPACING_SECONDS
    # A Celery countdown: it must be finite, and longer than a minute would hold every submit back.
    if not 0 <= spacing <= MAX_CYCLE_SPACING_SECONDS:
        errors.append(
            Error(
                f"SCHEDULE_MIN_SPACING_SECONDS must be between 0 and {MAX_CYCLE_SPACING_SECONDS}, got {spacing}",
                id="jobs.E034",
            )
        )
    grace = settings.PREEMPTION_GRACE_SECONDS
    if not 0 <= grace <= MAX_PREEMPTION_GRACE_SECONDS:
        errors.append(
            Error(
                f"PREEMPTION_GRACE_SECONDS must be between 0 and {MAX_PREEMPTION_GRACE_SECONDS}, got {grace}",
                id="jobs.E031",
            )
        )
    return errors


@register(Tags.compatibility)
def check_cluster_backend(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """CLUSTER_BACKEND must be known, and the simulated backend needs a sane time scale and cluster."""
    name = settings.CLUSTER_BACKEND
    if name not in KNOWN_BACKENDS:
        return [
            Error(
                f"unknown CLUSTER_BACKEND {name!r}",
                hint=f"Use one of: {', '.join(KNOWN_BACKENDS)}.",
                id="jobs.E002",
            )
        ]
    errors: list[CheckMessage] = []
    if name == "simulated":
        from scheduler.backends.sim_clusters import cluster_spec

        if settings.SIM_TIME_SCALE <= 0:
            errors.append(
                Error(f"SIM_TIME_SCALE must be positive, got {settings.SIM_TIME_SCALE}", id="jobs.E003")
            )
        try:
            cluster_spec(settings.SIM_CLUSTER)
        except ValueError as exc:
            errors.append(Error(str(exc), hint="Set SIM_CLUSTER to a known cluster.", id="jobs.E004"))
    return errors


# Beyond this many virtual GPUs a value is a typo, not a test set-up (real GPUs come from NVML).
MAX_VIRTUAL_GPUS = 64


def _writable_folder_problem(path: str) -> str | None:
    """Why ``path`` cannot be (or become) a folder this process writes in, or None."""
    if not path.strip():
        return "is empty"
    target = Path(path).expanduser()
    if target.exists():
        if not target.is_dir():
            return f"{target} exists and is not a folder"
        return None if os.access(target, os.W_OK | os.X_OK) else f"{target} is not writable"
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return f"{target} does not exist and cannot be created ({parent} is not writable)"
    return None


@register(Tags.compatibility)
def check_local_backend(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """With CLUSTER_BACKEND=local, the LOCAL_* settings must describe a node the backend can build:
    a known GPU mode, a sane number of virtual GPUs with a model and memory, a known container mode,
    non-negative CPU, memory and stop grace, a writable work folder, and in ``nvml`` mode a driver."""
    if settings.CLUSTER_BACKEND != "local":
        return []
    from scheduler.backends.local.containers import CONTAINER_MODES
    from scheduler.backends.local.inventory import GPU_MODES

    errors: list[CheckMessage] = []
    hint_doc = "See docs/local-backend.md (Settings)."
    gpu_mode = settings.LOCAL_GPUS
    if gpu_mode not in GPU_MODES:
        errors.append(
            Error(
                f"LOCAL_GPUS={gpu_mode!r} is not a GPU mode",
                hint=f"Use one of: {', '.join(GPU_MODES)}. {hint_doc}",
                id="jobs.E010",
            )
        )
    count = settings.LOCAL_VIRTUAL_GPUS
    if not 0 <= count <= MAX_VIRTUAL_GPUS:
        errors.append(
            Error(
                f"LOCAL_VIRTUAL_GPUS must be between 0 and {MAX_VIRTUAL_GPUS}, got {count}",
                hint="It is the number of virtual GPUs used when no NVIDIA driver is present.",
                id="jobs.E011",
            )
        )
    model = settings.LOCAL_VIRTUAL_GPU_MODEL
    if not str(model).strip() or len(str(model)) > 100:
        errors.append(
            Error(
                f"LOCAL_VIRTUAL_GPU_MODEL must be a GPU model name of 1 to 100 characters, got {model!r}",
                hint="For example 'Virtual GPU' or 'Tesla T4' (jobs may ask for a model by name).",
                id="jobs.E012",
            )
        )
    memory = settings.LOCAL_VIRTUAL_GPU_MEMORY_MIB
    if memory <= 0:
        errors.append(
            Error(
                f"LOCAL_VIRTUAL_GPU_MEMORY_MIB must be positive, got {memory}",
                hint="The memory of each virtual GPU in MiB, e.g. 16384.",
                id="jobs.E013",
            )
        )
    containers_mode = settings.LOCAL_CONTAINERS
    if containers_mode not in CONTAINER_MODES:
        errors.append(
            Error(
                f"LOCAL_CONTAINERS={containers_mode!r} is not a container mode",
                hint=f"Use one of: {', '.join(CONTAINER_MODES)}. {hint_doc}",
                id="jobs.E014",
            )
        )
    for name in ("LOCAL_CPU_MILLI", "LOCAL_MEMORY_MIB", "LOCAL_STOP_GRACE_SECONDS"):
        value = getattr(settings, name)
        if value < 0:
            errors.append(
                Error(
                    f"{name} must not be negative, got {value}",
                    hint="CPU and memory 0 mean: what the machine has; a stop grace of 0 kills at once.",
                    id="jobs.E015",
                )
            )
    problem = _writable_folder_problem(str(settings.LOCAL_WORK_DIR))
    if problem:
        errors.append(
            Error(
                f"LOCAL_WORK_DIR {problem}",
                hint="Point LOCAL_WORK_DIR at a folder the platform's user can write (task folders and logs).",
                id="jobs.E016",
            )
        )
    if gpu_mode == "nvml":
        from scheduler.backends.local.inventory import gpu_inventory

        try:
            gpu_inventory(mode="nvml")
        except Exception as exc:  # noqa: BLE001  (NoGpuDriver, or anything else: a check never crashes)
            errors.append(
                Error(
                    f"LOCAL_GPUS=nvml but no NVIDIA GPU is usable: {exc}",
                    hint="Install the NVIDIA driver, or set LOCAL_GPUS=auto (virtual GPUs without a driver).",
                    id="jobs.E017",
                )
            )
    elif gpu_mode == "virtual" and count == 0:
        errors.append(
            Warning(
                "LOCAL_GPUS=virtual with LOCAL_VIRTUAL_GPUS=0: the node has no GPU, only CPU jobs can run",
                hint="Set LOCAL_VIRTUAL_GPUS to 1 or more.",
                id="jobs.W010",
            )
        )
    return errors


@register(Tags.security)
def check_local_isolation(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """With CLUSTER_BACKEND=local: as root, the job user must exist, the uid range parse and the work
    folder be reachable by it (outside var/); not root, jobs would run as the platform's own user:
    a one-line warning in development, an error under production settings unless
    LOCAL_TRUSTED_USERS=1 (docs/local-backend.md, "Threat model")."""
    if settings.CLUSTER_BACKEND != "local":
        return []
    import pwd
    import stat

    from scheduler.backends.local import parse_uid_range

    user = settings.LOCAL_JOB_USER
    if os.geteuid() != 0 or not user:
        if settings.LOCAL_TRUSTED_USERS:
            return []
        me = pwd.getpwuid(os.geteuid()).pw_name
        why = "not root, so it cannot switch to LOCAL_JOB_USER" if user else "LOCAL_JOB_USER is empty"
        if settings.LOCAL_ISOLATION_REQUIRED:
            return [
                Error(
                    f"the local backend would run every job as the platform's own user {me!r} ({why}), "
                    "so any job could read its database and secrets; refusing to start",
                    hint="Run the platform as root (jobs then run as their own uid), or set "
                    "LOCAL_TRUSTED_USERS=1 if only trusted users can submit jobs.",
                    id="jobs.E018",
                )
            ]
        return [
            Warning(
                f"jobs run as the platform's own user {me!r} ({why}): only trusted users may submit jobs",
                hint="Run as root to isolate jobs, or set LOCAL_TRUSTED_USERS=1 to silence this.",
                id="jobs.W011",
            )
        ]
    errors: list[CheckMessage] = []
    try:
        pwd.getpwnam(user)
    except KeyError:
        # Development: `make run` creates it before anything binds; other commands (replay, shell)
        # must not be blocked by it. Production: nothing would create it.
        severity = Error if settings.LOCAL_ISOLATION_REQUIRED else Warning
        errors.append(
            severity(
                f"LOCAL_JOB_USER {user!r} does not exist (yet): local jobs cannot start without it",
                hint=f"`make run` creates it when run as root; or: useradd --system --no-create-home "
                f"--shell /usr/sbin/nologin {user}",
                id="jobs.E019" if severity is Error else "jobs.W012",
            )
        )
    try:
        parse_uid_range(settings.LOCAL_JOB_UID_RANGE)
    except ValueError as exc:
        errors.append(Error(f"LOCAL_JOB_UID_RANGE: {exc}", id="jobs.E020"))
    work = Path(settings.LOCAL_WORK_DIR).expanduser().resolve()
    var = Path(settings.VAR_DIR).resolve()
    if work == var or var in work.parents:
        errors.append(
            Error(
                f"LOCAL_WORK_DIR {work} is inside the platform's private {var}: jobs running as their "
                "own uid could not reach their folders",
                hint="Put LOCAL_WORK_DIR outside VAR_DIR (the default is a folder beside it).",
                id="jobs.E021",
            )
        )
    errors += _open_local_services()
    for folder in work.parents:
        if folder.exists() and not folder.stat().st_mode & stat.S_IXOTH:
            errors.append(
                Error(
                    f"LOCAL_WORK_DIR {work}: {folder} is mode {stat.S_IMODE(folder.stat().st_mode):04o}, "
                    "so job users cannot reach their folders",
                    hint="Allow others to traverse it (chmod o+x) or move LOCAL_WORK_DIR.",
                    id="jobs.E022",
                )
            )
            break
    return errors


@register(Tags.compatibility)
def check_kubernetes_checkpoint_volume(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """KUBERNETES_CHECKPOINT_VOLUME must be empty, ``pvc:<claim>`` or ``hostPath:<absolute dir>``."""
    if settings.CLUSTER_BACKEND != "kubernetes":
        return []
    from scheduler.backends.kubernetes.pods import parse_checkpoint_volume

    try:
        parse_checkpoint_volume(getattr(settings, "KUBERNETES_CHECKPOINT_VOLUME", ""))
    except ValueError as exc:
        return [
            Error(
                f"KUBERNETES_CHECKPOINT_VOLUME: {exc}", hint="See docs/kubernetes.md (3.1).", id="jobs.E023"
            )
        ]
    return []


_LOCAL_HOSTS = ("", "localhost", "127.0.0.1", "::1")


def _open_local_services() -> list[CheckMessage]:
    """Jobs share the machine's network: a database or Redis on this machine without a password is
    theirs to read and write, whatever their uid (docs/local-backend.md, "Threat model")."""
    from urllib.parse import urlsplit

    open_services = []
    database = settings.DATABASES["default"]
    if (
        "postgresql" in str(database.get("ENGINE", ""))
        and not database.get("PASSWORD")
        and str(database.get("HOST") or "") in _LOCAL_HOSTS
    ):
        open_services.append(f"PostgreSQL as {database.get('USER') or 'the default user'!r}")
    redis_url = str(getattr(settings, "REDIS_URL", "") or "")
    if redis_url:
        parts = urlsplit(redis_url)
        if not parts.password and (parts.hostname or "") in _LOCAL_HOSTS:
            open_services.append("Redis (the Celery broker)")
    if not open_services:
        return []
    return [
        Warning(
            f"local jobs can reach {' and '.join(open_services)} on this machine without a password",
            hint="Give the service a password (in DATABASE_URL / REDIS_URL), or block the job uids "
            "with iptables' owner match (docs/local-backend.md, Threat model).",
            id="jobs.W013",
        )
    ]

"""The local backend: the machine the platform runs on is the cluster's one node.

Every task runs for real, as a subprocess (or a Docker container, see ``containers``) supervised by
its own runner daemon (``runner.py``). Nothing lives in this object: the state of every task is a
folder of files under ``work_dir``, so the web process, the Celery worker that binds and beat all
see the same tasks, and a restarted platform finds its running tasks again (their runners kept
running) and reports the ones whose runner vanished without an exit record as FAILED (PLATFORM)::

    <work_dir>/.lock                       serialises bind and delete (fcntl)
    <work_dir>/jobs/<job>/job.json         the job's MASTER_PORT, shared by all its ranks, and its uid
    <work_dir>/jobs/<job>/.checkpoint/     CHECKPOINT_DIR, kept across the job's runs
    <work_dir>/jobs/<job>/<task>/task.json      what to run, where (the placement), written by bind
                                 runner.json    the runner's pid and process identity
                                 started.json   the command's pid/process group (or container id)
                                 exit.json      how it ended (exit code, signal, who killed it)
                                 deleted.json   delete_job was called: stop it, forget it
                                 preempt.json   preempt_job was called: stop it, keep its checkpoint
                                 output.log     stdout + stderr of the command
                                 work/          the task's working folder (its cwd; HOME of a job user)
                                 tmp/           the run's private TMPDIR

Phases: PENDING until the runner is up, STARTING until the command started, RUNNING, then
SUCCEEDED (exit code 0) or FAILED with a category: TIMEOUT (the runner killed it at its maximum
runtime), OOM (SIGKILL it did not send, which on Linux is the kernel's OOM killer, or "CUDA out of
memory" in the log, or Docker's OOMKilled), IMAGE (the container image could not be had), PLATFORM
(the runner vanished, or never started), USER otherwise. Signals are reported as exit code 128+n.

Deleted tasks (``delete_job``) are forgotten by ``task_statuses`` at once, like the pods of the
Kubernetes backend, but their folders stay (logs remain readable) and ``snapshot`` keeps counting
their GPUs until the process is really gone (SIGTERM, then SIGKILL after ``stop_grace_s``). Finished
task folders are removed ``finished_retention_s`` after they ended; a job's folder (its checkpoint
with it) when none of its task folders is left.

Preempted tasks (``preempt_job``) get SIGTERM and the grace period the caller gave, then SIGKILL (the
runner does it, so the caller never waits); they stay listed as FAILED with no category and a message
starting "preempted", and the next bind of the same task starts a new run with the same checkpoint.

Isolation (``job_user``, only when the platform runs as root): every command runs as an unprivileged
uid, one per job when ``job_uid_range`` is given, so that it cannot read the platform's files and
processes or another job's. State files stay root's (0600) in root-owned folders the job can only
traverse (0711); the job owns just its ``work/``, ``tmp/`` and checkpoint folders (0700).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.backends.base import (
    PREEMPTED_PREFIX,
    PermanentBackendError,
    PlacementConflictError,
    TaskPhase,
    TaskSpec,
    TaskStatus,
    TransientBackendError,
)
from scheduler.backends.local import containers, runner, workspace
from scheduler.backends.local.environment import task_environment
from scheduler.backends.local.inventory import GPU_MODES, GpuInventory, gpu_inventory, machine_node
from scheduler.backends.throughput import THROUGHPUT_ENV, THROUGHPUT_FILE_NAME, reported_throughput
from scheduler.model import GPU_MILLI, ClusterSnapshot, Node, Placement

log = logging.getLogger(__name__)

RUNNER_SCRIPT = Path(runner.__file__).resolve()
LOG_TAIL_BYTES = 1024 * 1024
OOM_SCAN_BYTES = 64 * 1024
# The newest progress line is near the end; a status read must stay cheap for every running task.
THROUGHPUT_SCAN_BYTES = 16 * 1024
CUDA_OOM_MARKERS = ("CUDA out of memory", "CUDA error: out of memory", "CUDA_ERROR_OUT_OF_MEMORY")
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_INVENTORY_CACHE: dict[tuple[Any, ...], tuple[float, GpuInventory]] = {}


def safe_name(name: str) -> str:
    """A folder name for a job or task id: the id itself when harmless, else a cleaned id plus a hash
    of the original (so distinct ids never share a folder, and ``..`` cannot escape ``work_dir``)."""
    if _SAFE_NAME.fullmatch(name):
        return name
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:60] or "id"
    return f"{cleaned}-{hashlib.sha1(name.encode()).hexdigest()[:10]}"


def parse_uid_range(text: str) -> tuple[int, int] | None:
    """``LOCAL_JOB_UID_RANGE``: ``"first-last"`` (inclusive, unprivileged: first >= 1000), or empty
    for none. Raises ValueError with a one-line message otherwise."""
    if not text.strip():
        return None
    first, sep, last = text.strip().partition("-")
    try:
        low, high = int(first), int(last)
    except ValueError:
        raise ValueError(f"uid range {text!r} must be FIRST-LAST, e.g. 3000000-3099999") from None
    if not sep or not 1000 <= low <= high < 2**32 - 1:
        raise ValueError(f"uid range {text!r} must be FIRST-LAST with 1000 <= FIRST <= LAST < 4294967295")
    return low, high


def _reachable_by_others(path: Path) -> bool:
    """Whether any user may traverse ``path`` and every folder above it."""
    try:
        return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])
    except OSError:
        return False


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


CHECKPOINT_DIR = ".checkpoint"  # a dot: never taken for a task folder (see _listdir)


@dataclass
class Outcome:
    phase: TaskPhase
    exit_code: int | None = None
    category: str = ""
    message: str = ""
    preempted: bool = False


@dataclass(frozen=True)
class JobIdentity:
    """Who a job's commands run as: its uid and gid, and the user name put in USER/LOGNAME."""

    uid: int
    gid: int
    name: str


def classify(exit_facts: dict[str, Any], log_tail: str = "") -> Outcome:
    """Phase, exit code and failure category from the runner's ``exit.json`` (see module docstring).

    ``log_tail`` (the end of the task's output) is only consulted for a failed task, for CUDA's
    out-of-memory message."""
    if exit_facts.get("platform_error"):
        return Outcome(TaskPhase.FAILED, None, "PLATFORM", str(exit_facts["platform_error"]))
    if exit_facts.get("image_error"):
        return Outcome(
            TaskPhase.FAILED, None, "IMAGE", f"container image unavailable: {exit_facts['image_error']}"
        )
    code = exit_facts.get("exit_code")
    sig = exit_facts.get("signal")
    if exit_facts.get("launch_error"):
        return Outcome(TaskPhase.FAILED, code, "USER", str(exit_facts["launch_error"]))
    reported = int(code) if code is not None else (128 + int(sig) if sig else None)
    killed_by = exit_facts.get("killed_by", "")
    if killed_by == "timeout":
        limit = exit_facts.get("max_runtime_s")
        limit_text = f" of {limit:g} s" if isinstance(limit, int | float) else ""
        return Outcome(TaskPhase.FAILED, reported, "TIMEOUT", f"killed after its maximum runtime{limit_text}")
    if killed_by == "stop":
        return Outcome(TaskPhase.FAILED, reported, "", "stopped: the job was cancelled")
    if killed_by == "preempt":
        # Before the exit code: a job that checkpoints and exits 0 on SIGTERM has not finished its work.
        how = (
            "before it started"
            if exit_facts.get("never_started")
            else (
                "after SIGKILL at the end of its grace period"
                if exit_facts.get("sent_sigkill")
                else f"on SIGTERM (exit code {reported})"
            )
        )
        return Outcome(TaskPhase.FAILED, reported, "", f"{PREEMPTED_PREFIX}: stopped {how}", preempted=True)
    if reported == 0:
        return Outcome(TaskPhase.SUCCEEDED, 0, "", "completed")
    if exit_facts.get("oom_killed"):
        return Outcome(
            TaskPhase.FAILED, reported, "OOM", "killed by the out-of-memory killer (container memory)"
        )
    if sig == signal.SIGKILL and not exit_facts.get("sent_sigkill"):
        return Outcome(
            TaskPhase.FAILED,
            reported,
            "OOM",
            "killed by SIGKILL that the platform did not send: most likely the kernel's out-of-memory killer",
        )
    if any(marker in log_tail for marker in CUDA_OOM_MARKERS):
        return Outcome(TaskPhase.FAILED, reported, "OOM", f"CUDA out of memory (exit code {reported})")
    if sig:
        return Outcome(TaskPhase.FAILED, reported, "USER", f"killed by {_signal_name(int(sig))}")
    return Outcome(TaskPhase.FAILED, reported, "USER", f"command exited with code {reported}")


@dataclass
class TaskRecord:
    """One task folder as read now. ``live`` means it holds its resources (not finished)."""

    dir: Path
    task: dict[str, Any]
    deleted: bool
    phase: TaskPhase
    outcome: Outcome | None
    started_at: float | None
    finished_at: float | None
    runner_pid: int | None
    pgid: int | None
    child_identity: str | None
    container_id: str
    # The runner recorded how the task ended (so it also cleaned up the process group).
    has_exit: bool
    # preempt_job was called for this run: the next bind replaces it.
    preempted: bool = False

    @property
    def live(self) -> bool:
        return not self.phase.finished

    @property
    def placement(self) -> Placement:
        data: dict[str, Any] = self.task["placement"]
        return Placement.from_dict(data)


class LocalBackend:
    """A :class:`~scheduler.backends.base.ClusterBackend` that runs tasks on this machine."""

    name = "local"

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        *,
        node_name: str = "",
        gpu_mode: str = "auto",
        virtual_gpus: int = 1,
        virtual_gpu_model: str = "Virtual GPU",
        virtual_gpu_memory_mib: int = 16384,
        cpu_milli: int | None = None,
        memory_mib: int | None = None,
        stop_grace_s: float = 10.0,
        containers_mode: str = "never",
        docker_host: str = "",
        passthrough_env: tuple[str, ...] = (),
        finished_retention_s: float = 7 * 24 * 3600.0,
        launch_timeout_s: float = 30.0,
        inventory_ttl_s: float = 300.0,
        job_user: str | None = None,
        job_uid_range: tuple[int, int] | None = None,
        python: str = sys.executable,
        nvml: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if containers_mode not in containers.CONTAINER_MODES:
            raise ValueError(
                f"unknown container mode {containers_mode!r}; use one of {', '.join(containers.CONTAINER_MODES)}"
            )
        if gpu_mode not in GPU_MODES:
            raise ValueError(f"unknown GPU mode {gpu_mode!r}; use one of {', '.join(GPU_MODES)}")
        if virtual_gpus < 0:
            raise ValueError(f"virtual_gpus must be >= 0, got {virtual_gpus}")
        if stop_grace_s < 0:
            raise ValueError(f"stop_grace_s must be >= 0, got {stop_grace_s}")
        if job_uid_range is not None and not 0 < job_uid_range[0] <= job_uid_range[1]:
            raise ValueError(
                f"job_uid_range must be (first, last) with 0 < first <= last, got {job_uid_range}"
            )
        self.work_dir = Path(work_dir).resolve()
        self.jobs_dir = self.work_dir / "jobs"
        self.lock_path = self.work_dir / ".lock"
        self.node_name = node_name or socket.gethostname() or "localhost"
        self.gpu_mode = gpu_mode
        self.virtual_gpus = virtual_gpus
        self.virtual_gpu_model = virtual_gpu_model
        self.virtual_gpu_memory_mib = virtual_gpu_memory_mib
        self.cpu_milli = cpu_milli
        self.memory_mib = memory_mib
        self.stop_grace_s = stop_grace_s
        self.containers_mode = containers_mode
        self.docker_host = docker_host
        self.passthrough_env = tuple(passthrough_env)
        self.finished_retention_s = finished_retention_s
        self.launch_timeout_s = launch_timeout_s
        self.inventory_ttl_s = inventory_ttl_s
        self.python = python
        self.nvml = nvml
        self.clock = clock
        self.job_user = job_user or None
        self.job_uid_range = job_uid_range

    # ----------------------------------------------------------------- inventory

    def gpus(self) -> GpuInventory:
        """This machine's GPUs, cached per process for ``inventory_ttl_s`` (NVML is slow to start)."""
        key = (
            self.gpu_mode,
            self.virtual_gpus,
            self.virtual_gpu_model,
            self.virtual_gpu_memory_mib,
            id(self.nvml),
        )
        now = time.monotonic()
        cached = _INVENTORY_CACHE.get(key)
        if cached is not None and now - cached[0] < self.inventory_ttl_s:
            return cached[1]
        try:
            inventory = gpu_inventory(
                mode=self.gpu_mode,
                virtual_count=self.virtual_gpus,
                virtual_model=self.virtual_gpu_model,
                virtual_memory_mib=self.virtual_gpu_memory_mib,
                nvml=self.nvml,
            )
        except Exception as exc:  # NoGpuDriver in "nvml" mode, ValueError for a bad mode
            raise PermanentBackendError(f"local backend: {exc}") from None
        if inventory.virtual and inventory.note:
            log.info("local backend uses %d virtual GPU(s): %s", len(inventory.gpus), inventory.note)
        _INVENTORY_CACHE[key] = (now, inventory)
        return inventory

    def node(self) -> Node:
        return machine_node(self.node_name, self.gpus(), cpu=self.cpu_milli, memory=self.memory_mib)

    # ----------------------------------------------------------------- task folders

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _job_dir(self, job_id: str) -> Path:
        return self.jobs_dir / safe_name(job_id)

    def task_dir(self, job_id: str, task_id: str) -> Path:
        """The folder of one task (its log is ``output.log`` there)."""
        return self._job_dir(job_id) / safe_name(task_id)

    def _task_dirs(self, job_id: str | None = None) -> Iterator[Path]:
        job_dirs = [self._job_dir(job_id)] if job_id is not None else self._listdir(self.jobs_dir)
        for job_dir in job_dirs:
            for task_dir in self._listdir(job_dir):
                if (task_dir / runner.TASK_FILE).is_file():
                    yield task_dir

    @staticmethod
    def _listdir(path: Path) -> list[Path]:
        try:
            # Names starting with "." are ours (archived attempts): never a job or task.
            return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
        except FileNotFoundError:
            return []

    def _runner_alive(self, info: dict[str, Any]) -> bool:
        pid = int(info.get("pid") or 0)
        identity = runner.process_identity(pid)
        expected = info.get("identity")
        return identity is not None and (expected is None or identity == expected)

    def _read(self, task_dir: Path) -> TaskRecord | None:
        task = runner.read_json(task_dir / runner.TASK_FILE)
        if task is None:
            return None
        deleted = (task_dir / runner.DELETED_FILE).exists()
        started = runner.read_json(task_dir / runner.STARTED_FILE)
        exit_facts = runner.read_json(task_dir / runner.EXIT_FILE)
        runner_info = runner.read_json(task_dir / runner.RUNNER_FILE)
        phase = TaskPhase.PENDING
        outcome: Outcome | None = None
        if exit_facts is None:
            if runner_info is not None and self._runner_alive(runner_info):
                phase = TaskPhase.RUNNING if started else TaskPhase.STARTING
            elif runner_info is None and self.clock() - float(task["created_at"]) < self.launch_timeout_s:
                phase = TaskPhase.PENDING
            else:
                # The runner is gone (or never came up). It may have written its record just now.
                exit_facts = runner.read_json(task_dir / runner.EXIT_FILE)
                if exit_facts is None:
                    what = "never started" if runner_info is None else "vanished without recording an exit"
                    outcome = Outcome(
                        TaskPhase.FAILED,
                        None,
                        "PLATFORM",
                        f"the task's runner process {what} (platform host restarted or the process was killed)",
                    )
        if exit_facts is not None:
            exit_facts.setdefault("max_runtime_s", task.get("max_runtime_s"))
            tail = self._tail(task_dir, OOM_SCAN_BYTES) if exit_facts.get("exit_code") != 0 else ""
            outcome = classify(exit_facts, tail)
        if outcome is not None:
            phase = outcome.phase
        finished_at = None
        if phase.finished:
            finished_at = float(exit_facts["finished_at"]) if exit_facts else None
        return TaskRecord(
            dir=task_dir,
            task=task,
            preempted=(task_dir / runner.PREEMPT_FILE).exists(),
            deleted=deleted,
            phase=phase,
            outcome=outcome,
            started_at=float(started["started_at"]) if started else None,
            finished_at=finished_at,
            runner_pid=int(runner_info["pid"]) if runner_info else None,
            pgid=int(started["pgid"]) if started and started.get("pgid") else None,
            child_identity=started.get("identity") if started else None,
            container_id=str(started.get("container_id", "")) if started else "",
            has_exit=exit_facts is not None,
        )

    def _records(self, job_id: str | None = None) -> list[TaskRecord]:
        return [r for r in (self._read(d) for d in self._task_dirs(job_id)) if r is not None]

    @staticmethod
    def _tail(task_dir: Path, limit: int) -> str:
        path = task_dir / runner.LOG_FILE
        try:
            with open(path, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - limit))
                return fh.read().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def _throughput(self, record: TaskRecord) -> float | None:
        file = record.dir / runner.WORK_DIR / THROUGHPUT_FILE_NAME
        return reported_throughput(file, self._tail(record.dir, THROUGHPUT_SCAN_BYTES))

    # ----------------------------------------------------------------- ClusterBackend

    def snapshot(self) -> ClusterSnapshot:
        node = self.node()
        running: list[Placement] = []
        for record in sorted(self._records(), key=lambda r: (float(r.task["created_at"]), r.task["task_id"])):
            if not record.live:
                continue
            placement = record.placement
            node.used_cpu_milli += placement.cpu_milli
            node.used_memory_mib += placement.memory_mib
            for idx in placement.gpu_indices:
                if 0 <= idx < len(node.gpus):
                    gpu = node.gpus[idx]
                    gpu.used_milli += placement.gpu_milli or GPU_MILLI
                    gpu.used_memory_mib += placement.gpu_memory_mib
                    gpu.tenants.append(placement.task_id)
            running.append(placement)
        return ClusterSnapshot(nodes=[node], running=running, now=self.clock())

    def task_statuses(self, job_id: str | None = None) -> list[TaskStatus]:
        """Every task not deleted, with its phase; finished ones until their folder is pruned."""
        rows = []
        for record in self._records(job_id):
            if record.deleted:
                continue
            task = record.task
            outcome = record.outcome
            failed = record.phase is TaskPhase.FAILED
            status = TaskStatus(
                job_id=task["job_id"],
                task_id=task["task_id"],
                phase=record.phase,
                node=task["placement"]["node"],
                gpu_indices=tuple(task["placement"]["gpu_indices"]),
                exit_code=outcome.exit_code if outcome else None,
                failure_category=(outcome.category or "PLATFORM")
                if failed and outcome and not outcome.preempted
                else "",
                message=outcome.message if outcome else "",
                started_at=record.started_at,
                finished_at=record.finished_at,
                throughput=self._throughput(record) if record.phase is TaskPhase.RUNNING else None,
            )
            rows.append(((status.job_id, int(task.get("rank", 0)), status.task_id), status))
        return [status for _, status in sorted(rows, key=lambda row: row[0])]

    def bind(self, spec: TaskSpec, placement: Placement) -> None:
        """Start ``spec`` on ``placement``; a repeat with the same placement is a no-op.

        Raises PermanentBackendError for a placement this machine cannot have (unknown node or GPU),
        an empty command, or containers required without an engine (one line); PlacementConflictError
        when the GPUs are already taken or the task already runs on other GPUs (the decision went
        stale; the platform re-plans the job); TransientBackendError while an earlier run of the same
        task is still stopping. After ``delete_job`` the same task id may be bound again (a retry):
        the new run starts afresh and the old run's folder moves to ``<job>/.attempts/``."""
        argv = [str(a) for a in list(spec.command) + list(spec.args)]
        if not argv or not argv[0]:
            raise PermanentBackendError(f"task {spec.task_id}: no command to run")
        node = self.node()
        if placement.node != node.name:
            raise PermanentBackendError(
                f"task {spec.task_id} is placed on node {placement.node!r}, but the local backend's "
                f"only node is {node.name!r}"
            )
        for idx in placement.gpu_indices:
            if not 0 <= idx < len(node.gpus):
                raise PermanentBackendError(f"node {node.name} has no GPU {idx} ({len(node.gpus)} GPU(s))")
        mode, container_spec = self._execution_mode(spec, placement)
        task_dir = self.task_dir(spec.job_id, spec.task_id)
        with self._locked():
            existing = self._read(task_dir) if (task_dir / runner.TASK_FILE).is_file() else None
            if existing is not None:
                # A deleted or preempted run is over (or ending): the next bind is a new run.
                replaced = existing.deleted or existing.preempted
                if not replaced and self._same_placement(existing, placement):
                    return
                if existing.live and not replaced:
                    raise PlacementConflictError(
                        f"task {spec.task_id} already runs on GPUs {list(existing.placement.gpu_indices)}, "
                        f"not {list(placement.gpu_indices)}"
                    )
                if existing.live:
                    raise TransientBackendError(f"task {spec.task_id}: its previous run is still stopping")
                self._archive(task_dir)
            self._prune()
            self._check_fits(node, placement)
            identity = self._job_identity(spec.job_id)
            master_port = self._master_port(spec) if spec.world_size > 1 else None
            checkpoint = self._checkpoint_dir(spec, identity)
            container = mode == "container"
            self._make_dir(task_dir, 0o711 if identity else 0o700, None)
            work = self._make_dir(task_dir / runner.WORK_DIR, 0o700, identity)
            tmp = self._make_dir(task_dir / runner.TMP_DIR, 0o700, identity)
            if container_spec is not None:
                container_spec["checkpoint_dir"] = str(checkpoint)
                if identity:
                    # The job's uid inside too: its mounted folders are that uid's, mode 0700.
                    container_spec["user"] = f"{identity.uid}:{identity.gid}"
            env = task_environment(
                spec,
                placement,
                uuids={g.index: g.uuid for g in node.gpus},
                master_port=master_port,
                container=container,
                passthrough=self.passthrough_env,
                checkpoint_dir=runner.CONTAINER_CHECKPOINT_DIR if container else str(checkpoint),
                tmp_dir="" if container else str(tmp),
                identity={"HOME": str(work), "USER": identity.name, "LOGNAME": identity.name}
                if identity and not container
                else None,
            )
            if identity and not container:
                env["PATH"] = self._job_path(env.get("PATH", ""))
            # The work folder is /workspace in a container (runner.py mounts it there).
            env[THROUGHPUT_ENV] = str((Path("/workspace") if container else work) / THROUGHPUT_FILE_NAME)
            workspace_target = None
            if workspace.is_workspace(env):
                argv, workspace_target = self._workspace_launch(spec, env, identity)
            runner.write_json(
                task_dir / runner.TASK_FILE,
                {
                    "job_id": spec.job_id,
                    "task_id": spec.task_id,
                    "rank": spec.rank,
                    "world_size": spec.world_size,
                    "image": spec.image,
                    "team": spec.team,
                    "user": spec.user,
                    "argv": argv,
                    "env": env,
                    "mode": mode,
                    "container": container_spec,
                    "placement": placement.to_dict(),
                    "max_runtime_s": spec.max_runtime_s,
                    "grace_s": self.stop_grace_s,
                    "master_port": master_port,
                    "checkpoint_dir": str(checkpoint),
                    "resume": spec.resume,
                    "workspace_target": workspace_target,
                    "job_user": {"uid": identity.uid, "gid": identity.gid, "name": identity.name}
                    if identity and not container
                    else None,
                    "created_at": self.clock(),
                },
            )
            # The runner writes the command's output through an open descriptor: the job user never
            # needs to open the file, and another job may not.
            (task_dir / runner.LOG_FILE).touch(mode=0o600)
            self._launch(task_dir, spec)

    # ----------------------------------------------------------------- isolation and checkpoints

    def _job_identity(self, job_id: str) -> JobIdentity | None:
        """The uid and gid the job's commands run as, or None (the platform's own user). With a uid
        range, each job keeps one uid for as long as its folder exists (recorded in job.json), so its
        checkpoint stays its own across runs and no two jobs' files ever share an owner."""
        if not self.job_user:
            return None
        if os.geteuid() != 0:
            raise PermanentBackendError(
                f"the local backend cannot run jobs as {self.job_user!r}: the platform is not root "
                "(unset LOCAL_JOB_USER to run them as the platform's own user)"
            )
        try:
            account = pwd.getpwnam(self.job_user)
        except KeyError:
            raise PermanentBackendError(
                f"job user {self.job_user!r} does not exist; create it (useradd --system "
                f"--no-create-home --shell /usr/sbin/nologin {self.job_user}) or set LOCAL_JOB_USER"
            ) from None
        self._check_reachable()
        if self.job_uid_range is None:
            return JobIdentity(account.pw_uid, account.pw_gid, account.pw_name)
        job_dir = self._job_dir(job_id)
        info = runner.read_json(job_dir / "job.json") or {}
        uid = info.get("uid")
        if not isinstance(uid, int):
            taken = {
                (runner.read_json(other / "job.json") or {}).get("uid")
                for other in self._listdir(self.jobs_dir)
            }
            first, last = self.job_uid_range
            uid = next((u for u in range(first, last + 1) if u not in taken), None)
            if uid is None:
                raise TransientBackendError(
                    f"all {last - first + 1} job uids of LOCAL_JOB_UID_RANGE {first}-{last} are in use"
                )
            self._write_job_info(job_id, uid=uid)
        return JobIdentity(int(uid), account.pw_gid, account.pw_name)

    def _check_reachable(self) -> None:
        """A job user must be able to walk down to its folders: every folder above the work folder
        must let others traverse it (x), or the job could not even open its CHECKPOINT_DIR."""
        for folder in [self.work_dir, *self.work_dir.parents]:
            try:
                mode = folder.stat().st_mode
            except FileNotFoundError:
                continue
            if not mode & stat.S_IXOTH:
                raise PermanentBackendError(
                    f"the job user cannot reach LOCAL_WORK_DIR {self.work_dir}: {folder} is mode "
                    f"{stat.S_IMODE(mode):04o}; put LOCAL_WORK_DIR outside the platform's private "
                    "folders (var/ is 0700), under folders others may traverse"
                )
        for folder in (self.work_dir, self.jobs_dir):
            folder.mkdir(parents=True, exist_ok=True)
            os.chmod(folder, 0o711)  # traverse, never list: job ids are easy to guess

    def _job_path(self, path: str) -> str:
        """PATH for a job user: the platform's entries that others can reach (the platform's own
        Python often lives in root's private home, e.g. pyenv under /root), and, when that leaves no
        ``python`` but a ``python3``, a folder of ours where ``python`` is that ``python3`` (what
        ``["python", "train.py"]`` means on a machine whose only shared Python is the system's)."""
        entries = [e for e in path.split(os.pathsep) if e and _reachable_by_others(Path(e))]
        if not any(os.access(Path(e) / "python", os.X_OK) for e in entries):
            python3 = next((Path(e) / "python3" for e in entries if (Path(e) / "python3").is_file()), None)
            if python3 is not None:
                shim = self.work_dir / "bin"
                shim.mkdir(exist_ok=True)
                os.chmod(shim, 0o755)
                link = shim / "python"
                if not link.is_symlink() or os.readlink(link) != str(python3):
                    tmp = shim / f".python-{os.getpid()}"
                    tmp.unlink(missing_ok=True)
                    tmp.symlink_to(python3)
                    os.replace(tmp, link)
                entries.append(str(shim))
        return os.pathsep.join(entries)

    def _make_dir(self, path: Path, mode: int, owner: JobIdentity | None) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        if owner is not None:
            os.chown(path, owner.uid, owner.gid)
        os.chmod(path, mode)
        return path

    def _checkpoint_dir(self, spec: TaskSpec, identity: JobIdentity | None) -> Path:
        """The job's CHECKPOINT_DIR: the folder the platform gave (``spec.checkpoint_dir``) or the
        job's own ``.checkpoint``, owned by the job's user; the job's folder above it is root's."""
        job_dir = self._job_dir(spec.job_id)
        self._make_dir(job_dir, 0o711 if identity else 0o755, None)
        folder = Path(spec.checkpoint_dir) if spec.checkpoint_dir else job_dir / CHECKPOINT_DIR
        return self._make_dir(folder, 0o700, identity)

    def _workspace_launch(
        self, spec: TaskSpec, env: dict[str, str], identity: JobIdentity | None
    ) -> tuple[list[str], str]:
        """A workspace binds 127.0.0.1 on a free port, in the user's home folder of the team; its
        command's $(NAME) references are expanded as Kubernetes would. Returns (argv, target)."""
        taken = [
            int(str(r.task["workspace_target"]).rsplit(":", 1)[1])
            for r in self._records()
            if r.live and r.task.get("workspace_target") and r.task["job_id"] != spec.job_id
        ]
        port = workspace.free_port(taken)
        homes = self._make_dir(self.work_dir / workspace.HOMES_DIR, 0o711 if identity else 0o755, None)
        team_dir = self._make_dir(homes / safe_name(spec.team or "team"), 0o711 if identity else 0o755, None)
        home = self._make_dir(team_dir / safe_name(spec.user or "user"), 0o700, identity)
        env.update({workspace.HOST: "127.0.0.1", workspace.PORT: str(port), workspace.HOME: str(home)})
        if source := env.get(workspace.LOGS_OF):
            env[workspace.LOGDIR] = str(self.checkpoint_dir(source) / workspace.TENSORBOARD_FOLDER)
        argv = workspace.expand_references([*spec.command, *spec.args], env)
        return argv, workspace.target(port)

    def workspace_target(self, job_id: str) -> str | None:
        """Where the proxy reaches the workspace ``job_id`` while its server runs, else None."""
        for record in self._records(job_id):
            if record.phase is TaskPhase.RUNNING and record.task.get("workspace_target"):
                return str(record.task["workspace_target"])
        return None

    def workspace_home(self, *, team: str, user: str) -> Path:
        """The home folder a workspace of ``user`` in ``team`` gets (its files survive every run)."""
        return workspace.home_dir(self.work_dir, safe_name(team or "team"), safe_name(user or "user"))

    def _write_job_info(self, job_id: str, **values: Any) -> None:
        job_dir = self._job_dir(job_id)
        job_dir.mkdir(parents=True, exist_ok=True)
        info = runner.read_json(job_dir / "job.json") or {"job_id": job_id}
        info.update(values)
        runner.write_json(job_dir / "job.json", info)

    def checkpoint_dir(self, job_id: str) -> Path:
        """Where the job's checkpoint folder is (whether or not it exists yet)."""
        return self._job_dir(job_id) / CHECKPOINT_DIR

    def _same_placement(self, record: TaskRecord, placement: Placement) -> bool:
        old = record.placement
        return (old.node, tuple(old.gpu_indices), old.gpu_milli, old.gpu_memory_mib) == (
            placement.node,
            tuple(placement.gpu_indices),
            placement.gpu_milli,
            placement.gpu_memory_mib,
        )

    def _execution_mode(self, spec: TaskSpec, placement: Placement) -> tuple[str, dict[str, Any] | None]:
        """("process", None) or ("container", its spec) per ``containers_mode`` (see docs)."""
        if self.containers_mode == "never" or not spec.image:
            return "process", None
        try:
            client = containers.connect(self.docker_host)
        except containers.DockerUnavailable as exc:
            if self.containers_mode == "always":
                raise PermanentBackendError(f"cannot run task {spec.task_id} in a container: {exc}") from None
            return "process", None
        if self.containers_mode == "auto" and not containers.has_image(client, spec.image):
            return "process", None  # auto: containers only for images this engine already has
        return "container", {
            "image": spec.image,
            "name": containers.container_name(spec.job_id, spec.task_id),
            "docker_host": containers.engine_address(self.docker_host),
            "gpu_indices": list(placement.gpu_indices),
            "labels": {"gpu-platform.io/job-id": spec.job_id, "gpu-platform.io/task-id": spec.task_id},
        }

    def _launch(self, task_dir: Path, spec: TaskSpec) -> None:
        """Start the runner; it daemonizes, so this returns as soon as the first process exits."""
        try:
            proc = subprocess.run(
                [self.python, "-I", str(RUNNER_SCRIPT), str(task_dir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                close_fds=True,
                start_new_session=True,
                timeout=30,
                check=False,
            )
        except subprocess.TimeoutExpired:
            shutil.rmtree(task_dir, ignore_errors=True)
            raise TransientBackendError(f"task {spec.task_id}: its runner took too long to start") from None
        except OSError as exc:  # the configured Python is missing or not executable: configuration
            shutil.rmtree(task_dir, ignore_errors=True)
            raise PermanentBackendError(
                f"task {spec.task_id}: cannot start its runner with {self.python}: {exc}"
            ) from None
        if proc.returncode != 0:
            shutil.rmtree(task_dir, ignore_errors=True)
            detail = (proc.stderr or b"").decode(errors="replace").strip().splitlines()
            raise PermanentBackendError(
                f"task {spec.task_id}: its runner failed to start ({detail[-1] if detail else proc.returncode})"
            )

    def _check_fits(self, node: Node, placement: Placement) -> None:
        """No GPU over 1000 milli or its memory, and the machine's CPU and memory not overcommitted,
        counting every task that still holds resources (including deleted ones still stopping)."""
        milli = dict.fromkeys(placement.gpu_indices, placement.gpu_milli or GPU_MILLI)
        memory = dict.fromkeys(placement.gpu_indices, placement.gpu_memory_mib)
        cpu, mem = placement.cpu_milli, placement.memory_mib
        for record in self._records():
            if not record.live:
                continue
            other = record.placement
            cpu += other.cpu_milli
            mem += other.memory_mib
            for idx in other.gpu_indices:
                if idx in milli:
                    milli[idx] += other.gpu_milli or GPU_MILLI
                    memory[idx] += other.gpu_memory_mib
        over = [i for i in milli if milli[i] > GPU_MILLI or memory[i] > node.gpus[i].memory_mib]
        if over or cpu > node.cpu_milli or mem > node.memory_mib:
            what = f"GPU(s) {over}" if over else "CPU or memory"
            raise PlacementConflictError(
                f"task {placement.task_id} does not fit on {node.name}: {what} already allocated"
            )

    def _master_port(self, spec: TaskSpec) -> int:
        """One free TCP port per job, chosen by the first task bound and reused by the others; a new
        one when no other task of the job is current (a rerun after a delete)."""
        job_dir = self._job_dir(spec.job_id)
        job_dir.mkdir(parents=True, exist_ok=True)
        info = runner.read_json(job_dir / "job.json")
        siblings = [
            r for r in self._records(spec.job_id) if not r.deleted and r.task["task_id"] != spec.task_id
        ]
        if info and info.get("master_port") and siblings:
            return int(info["master_port"])
        taken = {
            int(r.task["master_port"])
            for r in self._records()
            if r.live and r.task.get("master_port") and r.task["job_id"] != spec.job_id
        }
        for _ in range(20):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
            if port not in taken:
                break
        self._write_job_info(spec.job_id, master_port=port)
        return port

    def _archive(self, task_dir: Path) -> None:
        """Keep an earlier run's folder (its log) out of the way of a new run of the same task."""
        attempts = task_dir.parent / ".attempts"
        attempts.mkdir(exist_ok=True)
        os.replace(task_dir, attempts / f"{task_dir.name}-{int(self.clock() * 1000)}")

    def _prune(self) -> None:
        """Remove finished task folders older than the retention, and empty job folders."""
        horizon = self.clock() - self.finished_retention_s
        for record in self._records():
            if record.live:
                continue
            ended = record.finished_at or float(record.task["created_at"])
            if ended < horizon:
                shutil.rmtree(record.dir, ignore_errors=True)
        for job_dir in self._listdir(self.jobs_dir):
            attempts = job_dir / ".attempts"
            for old in self._listdir_all(attempts):
                if old.stat().st_mtime < horizon:
                    shutil.rmtree(old, ignore_errors=True)
            if not self._listdir(job_dir) and not self._listdir_all(attempts):
                shutil.rmtree(job_dir, ignore_errors=True)

    @staticmethod
    def _listdir_all(path: Path) -> list[Path]:
        try:
            return list(path.iterdir())
        except FileNotFoundError:
            return []

    def delete_job(self, job_id: str) -> None:
        """Stop every task of ``job_id`` and forget it (idempotent). Returns at once: the runner sends
        SIGTERM to the task's process group and SIGKILL after ``stop_grace_s``."""
        with self._locked():
            for record in self._records(job_id):
                if not record.deleted:
                    runner.write_json(record.dir / runner.DELETED_FILE, {"at": self.clock()})
                if record.live or not record.has_exit:  # running, or its runner vanished
                    self._stop(record)

    def preempt_job(self, job_id: str, grace_seconds: float) -> None:
        """Stop every running task of ``job_id`` so that it can resume later (idempotent; returns at
        once). The runner sends SIGTERM to the task's process group and SIGKILL ``grace_seconds``
        later; the task then reports FAILED with a message starting "preempted" and the next bind
        of it starts a new run (``RESUME=1``) with the same checkpoint folder."""
        grace = max(0.0, float(grace_seconds))
        with self._locked():
            for record in self._records(job_id):
                if record.deleted or record.preempted or not record.live:
                    continue
                runner.write_json(record.dir / runner.PREEMPT_FILE, {"at": self.clock(), "grace_s": grace})
                self._stop(record)

    def _stop(self, record: TaskRecord) -> None:
        if record.runner_pid and record.phase in (TaskPhase.STARTING, TaskPhase.RUNNING):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(record.runner_pid, signal.SIGTERM)  # the runner does TERM, grace, KILL
            return
        # No runner to do it (it vanished): kill what is left of the command directly.
        if record.pgid:
            leader = runner.process_identity(record.pgid)
            if leader is None or leader == record.child_identity:
                runner.kill_group(record.pgid, signal.SIGKILL)
        if record.container_id:
            with contextlib.suppress(Exception):
                containers.connect(self.docker_host).containers.get(record.container_id).remove(force=True)

    def logs(self, job_id: str, task_id: str) -> str:
        """The task's output so far (its last MiB). Empty for an unknown task."""
        path = self.task_dir(job_id, task_id) / runner.LOG_FILE
        try:
            with open(path, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - LOG_TAIL_BYTES))
                data = fh.read()
        except FileNotFoundError:
            return ""
        if size <= LOG_TAIL_BYTES:
            return data.decode("utf-8", errors="replace")
        # Cut at a line start, and say where the whole log is.
        data = data[data.find(b"\n") + 1 :]
        note = f"{runner.NOTE_PREFIX} earlier output omitted; the whole log is {path}\n"
        return note + data.decode("utf-8", errors="replace")


def create_local_backend(work_dir: str | os.PathLike[str], **kwargs: Any) -> LocalBackend:
    """Factory used by the platform (jobs.cluster.get_backend)."""
    return LocalBackend(work_dir, **kwargs)

"""A simulated cluster: nodes, GPUs and tasks that "run" over accelerated time, without hardware.

State lives in one JSON file (``state_path``) guarded by an ``fcntl`` lock on a sibling ``.lock``
file, so the web process, the Celery worker and beat all see the same cluster. Writes go to a
temporary file that replaces the state atomically, so a reader never sees half a file.

Task lifecycle. Phases are a pure function of the clock, computed when asked (nothing has to tick):
with ``e = (clock() - bound_at) * time_scale`` simulated seconds since the bind,

    PENDING   while e < pending_s                      (waiting for the "kubelet")
    STARTING  while e < pending_s + startup_s          (pulling the image, starting the container)
    RUNNING   while e < pending_s + startup_s + run_s
    SUCCEEDED or FAILED afterwards, by the task's exit code.

``run_s`` is ``TaskSpec.sim_duration_s`` or ``default_duration_s``. Failures are simulated
deterministically from the spec, decided once at bind time:

* ``command[0]`` is ``false`` (as in ``["false"]``)  -> exit code 1, category USER;
* env ``SIM_EXIT_CODE=<n>`` with n != 0             -> exit code n, category USER (137: OOM, as the
  kernel's OOM killer's SIGKILL would show);
* ``max_runtime_s`` shorter than the duration        -> killed at max_runtime_s, exit 124, TIMEOUT;
* env ``SIM_FAIL_CATEGORY=<category>``               -> the task fails at the end of its run with that
  category (PLATFORM, HARDWARE, USER, OOM, TIMEOUT or IMAGE), as if the node, the GPU or the runtime
  had failed: no exit code for PLATFORM, HARDWARE and IMAGE (the command did not end by itself), 1
  for USER, 137 for OOM, 124 for TIMEOUT. With ``SIM_FAIL_ATTEMPTS=<n>`` only the first n runs fail
  (``TaskSpec.attempt`` < n), so a retried job can be seen to succeed; without it every run fails.

Finished tasks no longer hold resources but stay reported for ``finished_retention_s`` real seconds,
so a status sync that runs late still sees how they ended. Timestamps in :class:`TaskStatus` are real
epoch seconds of the injected clock. This module is a pure library: no Django.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from scheduler.backends.base import (
    PermanentBackendError,
    PlacementConflictError,
    TaskPhase,
    TaskSpec,
    TaskStatus,
)
from scheduler.backends.sim_clusters import cluster_spec, parse_topology
from scheduler.model import GPU_MILLI, ClusterSnapshot, Gpu, Node, Placement

STATE_VERSION = 1
EXIT_TIMEOUT = 124
EXIT_OOM = 137
# SIM_FAIL_CATEGORY values and the exit code a task failing that way reports (None: killed from outside).
INJECTED_FAILURES: dict[str, int | None] = {
    "PLATFORM": None,
    "HARDWARE": None,
    "IMAGE": None,
    "USER": 1,
    "OOM": EXIT_OOM,
    "TIMEOUT": EXIT_TIMEOUT,
}


# PlacementConflictError lives in base.py (every backend raises it); re-exported here for old imports.
__all__ = ["PlacementConflictError", "SimulatedBackend", "create_simulated_backend"]


class SimulatedBackend:
    """A :class:`~scheduler.backends.base.ClusterBackend` whose cluster lives in a JSON file."""

    name = "simulated"

    def __init__(
        self,
        state_path: str | os.PathLike[str],
        *,
        cluster: str | list[dict[str, Any]] = "demo",
        time_scale: float = 60.0,
        clock: Callable[[], float] = time.time,
        default_duration_s: float = 300.0,
        pending_s: float = 2.0,
        startup_s: float = 10.0,
        finished_retention_s: float = 3600.0,
    ) -> None:
        if time_scale <= 0:
            raise ValueError(f"time_scale must be positive, got {time_scale}")
        self.state_path = Path(state_path)
        self.lock_path = self.state_path.with_name(self.state_path.name + ".lock")
        self.cluster_name = cluster if isinstance(cluster, str) else "custom"
        self._cluster_nodes = cluster_spec(cluster) if isinstance(cluster, str) else list(cluster)
        self.time_scale = float(time_scale)
        self.clock = clock
        self.default_duration_s = default_duration_s
        self.pending_s = pending_s
        self.startup_s = startup_s
        self.finished_retention_s = finished_retention_s
        self._topology_cache: dict[str, Any] = {}

    # ----------------------------------------------------------------- state file and locking

    @contextlib.contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _fresh_state(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "cluster": self.cluster_name,
            "created_at": self.clock(),
            "nodes": self._cluster_nodes,
            "tasks": {},
        }

    def _read(self) -> dict[str, Any] | None:
        try:
            with open(self.state_path) as fh:
                state: dict[str, Any] = json.load(fh)
        except FileNotFoundError:
            return None
        except json.JSONDecodeError as exc:
            raise PermanentBackendError(
                f"simulated cluster state {self.state_path} is not valid JSON ({exc}); delete it to reset"
            ) from exc
        if state.get("version") != STATE_VERSION:
            raise PermanentBackendError(
                f"simulated cluster state {self.state_path} has version {state.get('version')!r}, "
                f"expected {STATE_VERSION}; delete it to reset"
            )
        return state

    def _write(self, state: dict[str, Any]) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.state_path.parent, prefix=self.state_path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(state, fh, indent=1, sort_keys=True)
            os.replace(tmp, self.state_path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def _load(self) -> dict[str, Any]:
        """Current state for reading; creates the file on first use."""
        with self._locked(exclusive=False):
            state = self._read()
        if state is not None:
            return state
        with self._locked(exclusive=True):
            state = self._read()
            if state is None:
                state = self._fresh_state()
                self._write(state)
            return state

    @contextlib.contextmanager
    def _mutate(self) -> Iterator[dict[str, Any]]:
        """Read-modify-write under the exclusive lock; the state is written back if no error escapes."""
        with self._locked(exclusive=True):
            state = self._read() or self._fresh_state()
            yield state
            self._prune(state)
            self._write(state)

    def ensure_state(self) -> bool:
        """Create the state file if absent. Returns True when it was created (a fresh cluster)."""
        with self._locked(exclusive=True):
            if self._read() is not None:
                return False
            self._write(self._fresh_state())
            return True

    def reset(self) -> None:
        """Forget every task and reload the cluster spec."""
        with self._locked(exclusive=True):
            self._write(self._fresh_state())

    # ----------------------------------------------------------------- task lifecycle

    def _timeline(self, task: dict[str, Any]) -> tuple[float, float, float]:
        """Real epoch times at which the task starts STARTING, RUNNING, and finishes."""
        bound = float(task["bound_at"])
        starting = bound + self.pending_s / self.time_scale
        running = starting + self.startup_s / self.time_scale
        finished = running + float(task["run_s"]) / self.time_scale
        return starting, running, finished

    def _phase(self, task: dict[str, Any], now: float) -> TaskPhase:
        starting, running, finished = self._timeline(task)
        if now < starting:
            return TaskPhase.PENDING
        if now < running:
            return TaskPhase.STARTING
        if now < finished:
            return TaskPhase.RUNNING
        return TaskPhase.SUCCEEDED if task["exit_code"] == 0 else TaskPhase.FAILED

    def _prune(self, state: dict[str, Any]) -> None:
        now = self.clock()
        for task_id in [
            tid
            for tid, task in state["tasks"].items()
            if self._timeline(task)[2] + self.finished_retention_s < now
        ]:
            del state["tasks"][task_id]

    @staticmethod
    def _injected_failure(spec: TaskSpec) -> str:
        """The category ``SIM_FAIL_CATEGORY`` asks this run of the task to fail with, or ""."""
        category = spec.env.get("SIM_FAIL_CATEGORY", "").strip().upper()
        if not category:
            return ""
        if category not in INJECTED_FAILURES:
            raise PermanentBackendError(
                f"SIM_FAIL_CATEGORY={spec.env['SIM_FAIL_CATEGORY']!r} is not one of "
                f"{', '.join(INJECTED_FAILURES)}"
            )
        raw = spec.env.get("SIM_FAIL_ATTEMPTS", "").strip()
        if raw:
            try:
                attempts = int(raw)
            except ValueError:
                raise PermanentBackendError(f"SIM_FAIL_ATTEMPTS={raw!r} is not an integer") from None
            if spec.attempt >= attempts:
                return ""
        return category

    @classmethod
    def _outcome(cls, spec: TaskSpec, duration: float) -> tuple[float, int | None, str, str]:
        """(run seconds, exit code, failure category, message) decided at bind time."""
        exit_code = 0
        if spec.command and os.path.basename(spec.command[0]) == "false":
            exit_code = 1
        raw = spec.env.get("SIM_EXIT_CODE", "")
        if raw:
            try:
                exit_code = int(raw)
            except ValueError:
                raise PermanentBackendError(f"SIM_EXIT_CODE={raw!r} is not an integer") from None
        if spec.max_runtime_s is not None and duration > spec.max_runtime_s:
            return (
                float(spec.max_runtime_s),
                EXIT_TIMEOUT,
                "TIMEOUT",
                (f"killed after its maximum runtime of {spec.max_runtime_s} s"),
            )
        injected = cls._injected_failure(spec)
        if injected:
            return (
                duration,
                INJECTED_FAILURES[injected],
                injected,
                f"simulated {injected} failure (SIM_FAIL_CATEGORY, run {spec.attempt + 1})",
            )
        if exit_code == 0:
            return duration, 0, "", "completed"
        if exit_code == EXIT_OOM:
            return duration, exit_code, "OOM", "killed (exit 137): out of memory"
        return duration, exit_code, "USER", f"command exited with code {exit_code}"

    def _active(self, state: dict[str, Any], now: float) -> list[dict[str, Any]]:
        return [t for t in state["tasks"].values() if not self._phase(t, now).finished]

    # ----------------------------------------------------------------- ClusterBackend

    def snapshot(self) -> ClusterSnapshot:
        state = self._load()
        now = self.clock()
        nodes = {spec["name"]: self._build_node(spec) for spec in state["nodes"]}
        running: list[Placement] = []
        for task in sorted(self._active(state, now), key=lambda t: (t["bound_at"], t["task_id"])):
            placement = _placement_from(task)
            node = nodes.get(placement.node)
            if node is None:
                continue
            node.used_cpu_milli += placement.cpu_milli
            node.used_memory_mib += placement.memory_mib
            for idx in placement.gpu_indices:
                gpu = node.gpus[idx]
                gpu.used_milli += placement.gpu_milli
                gpu.used_memory_mib += placement.gpu_memory_mib
                gpu.tenants.append(placement.task_id)
            running.append(placement)
        return ClusterSnapshot(nodes=list(nodes.values()), running=running, now=now)

    def _build_node(self, spec: dict[str, Any]) -> Node:
        key = spec.get("topology")
        if key and key not in self._topology_cache:
            self._topology_cache[key] = parse_topology(key, gpu_model=spec["gpu_model"])
        gpus = [
            Gpu(
                index=i,
                model=spec["gpu_model"],
                memory_mib=spec["gpu_memory_mib"],
                uuid=f"GPU-sim-{spec['name']}-{i}",
            )
            for i in range(spec["gpu_count"])
        ]
        return Node(
            name=spec["name"],
            cpu_milli=spec["cpu_milli"],
            memory_mib=spec["memory_mib"],
            gpus=gpus,
            labels=dict(spec.get("labels", {})),
            driver_version=spec.get("driver_version", ""),
            cuda_version=spec.get("cuda_version", ""),
            topology=self._topology_cache.get(key) if key else None,
            schedulable=spec.get("schedulable", True),
        )

    def bind(self, spec: TaskSpec, placement: Placement) -> None:
        """Start ``spec`` on ``placement``. Binding the same task to the same place again is a no-op."""
        now = self.clock()
        duration = spec.sim_duration_s if spec.sim_duration_s is not None else self.default_duration_s
        if duration < 0:
            raise PermanentBackendError(f"task {spec.task_id}: negative simulated duration {duration}")
        run_s, exit_code, category, message = self._outcome(spec, float(duration))
        with self._mutate() as state:
            existing = state["tasks"].get(spec.task_id)
            if existing is not None:
                if existing["node"] == placement.node and tuple(existing["gpu_indices"]) == tuple(
                    placement.gpu_indices
                ):
                    return
                raise PlacementConflictError(
                    f"task {spec.task_id} is already bound to {existing['node']} "
                    f"GPUs {existing['gpu_indices']}, not {placement.node} GPUs {list(placement.gpu_indices)}"
                )
            self._check_fits(state, placement, now)
            state["tasks"][spec.task_id] = {
                "job_id": spec.job_id,
                "task_id": spec.task_id,
                "rank": spec.rank,
                "world_size": spec.world_size,
                "image": spec.image,
                "command": list(spec.command) + list(spec.args),
                "team": spec.team,
                "user": spec.user,
                "node": placement.node,
                "gpu_indices": list(placement.gpu_indices),
                "gpu_milli": placement.gpu_milli,
                "gpu_memory_mib": placement.gpu_memory_mib,
                "cpu_milli": placement.cpu_milli,
                "memory_mib": placement.memory_mib,
                "reason": placement.reason,
                "predicted_slowdown": placement.predicted_slowdown,
                "bound_at": now,
                "run_s": run_s,
                "exit_code": exit_code,
                "failure_category": category,
                "message": message,
            }

    def _check_fits(self, state: dict[str, Any], placement: Placement, now: float) -> None:
        node_spec = next((n for n in state["nodes"] if n["name"] == placement.node), None)
        if node_spec is None:
            raise PermanentBackendError(f"node {placement.node!r} does not exist in the simulated cluster")
        for idx in placement.gpu_indices:
            if not 0 <= idx < node_spec["gpu_count"]:
                raise PermanentBackendError(f"node {placement.node} has no GPU {idx}")
        milli = dict.fromkeys(placement.gpu_indices, placement.gpu_milli)
        memory = dict.fromkeys(placement.gpu_indices, placement.gpu_memory_mib)
        cpu, mem = placement.cpu_milli, placement.memory_mib
        for task in self._active(state, now):
            if task["node"] != placement.node:
                continue
            cpu += task["cpu_milli"]
            mem += task["memory_mib"]
            for idx in task["gpu_indices"]:
                if idx in milli:
                    milli[idx] += task["gpu_milli"]
                    memory[idx] += task["gpu_memory_mib"]
        over = [i for i in milli if milli[i] > GPU_MILLI or memory[i] > node_spec["gpu_memory_mib"]]
        if over or cpu > node_spec["cpu_milli"] or mem > node_spec["memory_mib"]:
            what = f"GPU(s) {over}" if over else "CPU or memory"
            raise PlacementConflictError(
                f"task {placement.task_id} does not fit on {placement.node}: {what} already allocated"
            )

    def task_statuses(self, job_id: str | None = None) -> list[TaskStatus]:
        state = self._load()
        now = self.clock()
        out = []
        for task in sorted(state["tasks"].values(), key=lambda t: (t["job_id"], t["rank"], t["task_id"])):
            if job_id is not None and task["job_id"] != job_id:
                continue
            phase = self._phase(task, now)
            _, running_at, finished_at = self._timeline(task)
            failed = phase is TaskPhase.FAILED
            out.append(
                TaskStatus(
                    job_id=task["job_id"],
                    task_id=task["task_id"],
                    phase=phase,
                    node=task["node"],
                    gpu_indices=tuple(task["gpu_indices"]),
                    exit_code=task["exit_code"] if phase.finished else None,
                    failure_category=task["failure_category"] if failed else "",
                    message=task["message"] if phase.finished else "",
                    started_at=running_at if now >= running_at else None,
                    finished_at=finished_at if phase.finished else None,
                )
            )
        return out

    def delete_job(self, job_id: str) -> None:
        with self._mutate() as state:
            for task_id in [tid for tid, t in state["tasks"].items() if t["job_id"] == job_id]:
                del state["tasks"][task_id]

    def logs(self, job_id: str, task_id: str) -> str:
        state = self._load()
        task = state["tasks"].get(task_id)
        if task is None or task["job_id"] != job_id:
            return ""
        now = self.clock()
        phase = self._phase(task, now)
        starting, running, finished = self._timeline(task)
        lines = [f"[sim] task {task_id} bound to {task['node']} GPUs {task['gpu_indices']}"]
        if phase is not TaskPhase.PENDING:
            lines.append(f"[sim] pulling image {task['image'] or '(none)'}")
        if now >= running:
            lines.append(f"[sim] running: {' '.join(task['command'])}")
            sim_elapsed = (min(now, finished) - running) * self.time_scale
            for step in range(1, min(int(sim_elapsed // 60), 20) + 1):
                lines.append(f"[sim] minute {step}: training step {step * 100}")
        if phase.finished and task["exit_code"] is None:
            lines.append(f"[sim] failed: {task['message']}")
        elif phase.finished:
            lines.append(f"[sim] exited with code {task['exit_code']}: {task['message']}")
        return "\n".join(lines) + "\n"


def _placement_from(task: dict[str, Any]) -> Placement:
    return Placement(
        job_id=task["job_id"],
        task_id=task["task_id"],
        node=task["node"],
        gpu_indices=tuple(task["gpu_indices"]),
        gpu_milli=task["gpu_milli"],
        gpu_memory_mib=task["gpu_memory_mib"],
        cpu_milli=task["cpu_milli"],
        memory_mib=task["memory_mib"],
        reason=task.get("reason", ""),
        predicted_slowdown=task.get("predicted_slowdown"),
    )


def create_simulated_backend(
    state_path: str | os.PathLike[str], *, cluster: str = "demo", time_scale: float = 60.0, **kwargs: Any
) -> SimulatedBackend:
    """Factory used by the platform (jobs.cluster.get_backend)."""
    return SimulatedBackend(state_path, cluster=cluster, time_scale=time_scale, **kwargs)

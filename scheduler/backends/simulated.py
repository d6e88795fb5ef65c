"""A simulated cluster: nodes, GPUs and tasks that "run" over accelerated time, without hardware.

State lives in one JSON file (``state_path``) guarded by an ``fcntl`` lock on a sibling ``.lock``
file, so the web process, the Celery worker and beat all see the same cluster. Writes go to a
temporary file that replaces the state atomically, so a reader never sees half a file.

Task lifecycle. With ``e = (clock() - bound_at) * time_scale`` simulated seconds since the bind,

    PENDING   while e < pending_s                      (waiting for the "kubelet")
    STARTING  while e < pending_s + startup_s          (pulling the image, starting the container)
    RUNNING   until its work is done (or it is stopped)
    SUCCEEDED or FAILED afterwards, by the task's exit code.

A run's *work* is ``TaskSpec.sim_duration_s`` (or ``default_duration_s``) simulated seconds of
progress alone on ideal GPUs. The task progresses at a *rate* in (0, 1]: 1.0 without a performance
model, so it ends ``work`` simulated seconds after it starts running. With ``perf`` (the simulator's
ground truth, :mod:`scheduler.sim.perf`) and the job type named by env ``SIM_JOB_TYPE`` (a Gavel
workload, e.g. ``ResNet-50 (batch size 64)``), the rate follows the simulator's formulas:

* a task on a shared GPU (``gpu_milli < 1000``): ``1 / (1 + sum over co-tenants (1 / y(me | other) - 1))``
  over the other live tasks on that GPU (a tenant that leaves or arrives changes it);
* whole-GPU tasks: ``comm_rate(link of the job's GPU set) / comm_rate(best link for that many GPUs)``,
  the link being the bottleneck of the job's GPUs on one node, or ``NET`` across nodes.

A RUNNING task's status reports that rate (``TaskStatus.rate``): what a real cluster would measure
as its throughput over its solo throughput; the policy's unpack rule reads it.

Phases are a function of the stored state and the clock: reads replay the finish events since the
last write in time order (a finish changes its co-tenants' rates) without writing anything.

Failures are simulated deterministically from the spec, decided once at bind time:

* ``command[0]`` is ``false`` (as in ``["false"]``)  -> exit code 1, category USER;
* env ``SIM_EXIT_CODE=<n>`` with n != 0             -> exit code n, category USER (137: OOM, as the
  kernel's OOM killer's SIGKILL would show);
* ``max_runtime_s`` shorter than the duration        -> killed at max_runtime_s, exit 124, TIMEOUT;
* env ``SIM_FAIL_CATEGORY=<category>``               -> the task fails at the end of its run with that
  category (PLATFORM, HARDWARE, USER, OOM, TIMEOUT or IMAGE), as if the node, the GPU or the runtime
  had failed: no exit code for PLATFORM, HARDWARE and IMAGE (the command did not end by itself), 1
  for USER, 137 for OOM, 124 for TIMEOUT. With ``SIM_FAIL_ATTEMPTS=<n>`` only the first n runs fail
  (``TaskSpec.attempt`` < n), so a retried job can be seen to succeed; without it every run fails.

Checkpoints and preemption (DESIGN.md §5b). Every task gets ``CHECKPOINT_DIR`` (``TaskSpec.checkpoint_dir``
or ``<state dir>/checkpoints/job-<id>``), ``PREEMPTION_GRACE_SECONDS`` and, when resuming, ``RESUME=1``
in the environment it records. ``preempt_job(job_id, grace_seconds)`` is SIGTERM: the tasks keep
running (and progressing) for ``grace_seconds`` simulated seconds, then stop with phase FAILED, no
category and a message starting ``preempted``; their GPUs are held until then. A stopped task's
checkpoint is perfect (a job writes it on SIGTERM): its remaining work is kept under the task id
and survives ``delete_job``. A resumed run (``TaskSpec.resume``, or a checkpoint on record) does the
remaining work plus ``restart_penalty_s`` (restoring the checkpoint, the simulator's 30 s
``preempt_penalty_s``). ``delete_job`` is SIGKILL: what a run did since its last checkpoint is lost.

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
from typing import IO, TYPE_CHECKING, Any

from scheduler.backends.base import (
    PREEMPTED_PREFIX,
    PermanentBackendError,
    PlacementConflictError,
    TaskPhase,
    TaskSpec,
    TaskStatus,
)
from scheduler.backends.sim_clusters import cluster_spec, node_links, topology_from_file
from scheduler.backends.simulated_throughput import reported_throughput
from scheduler.model import GPU_MILLI, ClusterSnapshot, Gpu, Node, Placement, reserve

if TYPE_CHECKING:
    from scheduler.sim.perf import PerfModel

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
JOB_TYPE_ENV = "SIM_JOB_TYPE"
TOLERANCE_ENV = "SIM_SLOWDOWN_TOLERANCE"
# Finish events closer than this (clock seconds) are one instant: float noise must not order them.
EPS = 1e-9


# (cluster name, data folder) of the specs a backend of this process has loaded: later backends on the
# same spec skip the check, which copies the whole node list.
_LOADED_SPECS: set[tuple[str, str]] = set()


# PlacementConflictError lives in base.py (every backend raises it); re-exported here for old imports.
__all__ = ["PlacementConflictError", "SimulatedBackend", "create_simulated_backend"]


class SimulatedBackend:
    """A :class:`~scheduler.backends.base.ClusterBackend` whose cluster lives in a JSON file.

    ``cluster``: a cluster spec name (``demo``, ``small``, ``philly-256``, ``alibaba-openb``; see
    ``scheduler/sim/clusters/``), a spec file's path, or node dicts.
    ``perf``: the simulator's performance ground truth for progress rates (None: every rate is 1).
    ``restart_penalty_s``: simulated seconds a resumed run spends restoring its checkpoint.
    """

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
        perf: PerfModel | None = None,
        restart_penalty_s: float = 30.0,
        data_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if time_scale <= 0:
            raise ValueError(f"time_scale must be positive, got {time_scale}")
        if restart_penalty_s < 0:
            raise ValueError(f"restart_penalty_s must be >= 0, got {restart_penalty_s}")
        self.state_path = Path(state_path)
        self.lock_path = self.state_path.with_name(self.state_path.name + ".lock")
        self.cluster_name = cluster if isinstance(cluster, str) else "custom"
        self._spec_source: tuple[str, Path | None] | None = None
        self._spec_nodes: list[dict[str, Any]] | None = None
        if isinstance(cluster, str):
            self._spec_source = (cluster, Path(data_dir) if data_dir else None)
            if (cluster, str(data_dir or "")) not in _LOADED_SPECS:
                cluster_spec(*self._spec_source)  # an unknown or malformed spec fails here (ValueError)
                _LOADED_SPECS.add((cluster, str(data_dir or "")))
        else:
            self._spec_nodes = list(cluster)
        self.time_scale = float(time_scale)
        self.clock = clock
        self.default_duration_s = default_duration_s
        self.pending_s = pending_s
        self.startup_s = startup_s
        self.finished_retention_s = finished_retention_s
        self.perf = perf
        self.restart_penalty_s = float(restart_penalty_s)
        self._links_cache: dict[str, dict[tuple[int, int], str]] = {}
        self._read_key: tuple[object, ...] | None = None
        self._read_state: dict[str, Any] | None = None

    @property
    def _cluster_nodes(self) -> list[dict[str, Any]]:
        """The cluster spec's node dicts: what a fresh state file starts with. Loaded on first use, not
        in the constructor: the platform builds a backend per request (jobs.cluster.get_backend), and
        only the one that creates the state file needs the nodes (a copy of 1,213 of them costs about
        as much as a submit's other checks)."""
        if self._spec_nodes is None:
            assert self._spec_source is not None
            self._spec_nodes = cluster_spec(*self._spec_source)
        return self._spec_nodes

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
            "checkpoints": {},
        }

    def _read(self) -> dict[str, Any] | None:
        try:
            with open(self.state_path) as fh:
                return self._parse(fh)
        except FileNotFoundError:
            return None

    def _parse(self, fh: IO[str]) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.load(fh)
        except json.JSONDecodeError as exc:
            raise PermanentBackendError(
                f"simulated cluster state {self.state_path} is not valid JSON ({exc}); delete it to reset"
            ) from exc
        if state.get("version") != STATE_VERSION:
            raise PermanentBackendError(
                f"simulated cluster state {self.state_path} has version {state.get('version')!r}, "
                f"expected {STATE_VERSION}; delete it to reset"
            )
        state.setdefault("checkpoints", {})
        return state

    def _write(self, state: dict[str, Any]) -> None:
        self._read_key, self._read_state = None, None
        fd, tmp = tempfile.mkstemp(dir=self.state_path.parent, prefix=self.state_path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                # dumps, not dump: json.dump streams through the pure-Python encoder, about 20 times
                # slower on a 1,000-node state (every bind and every sync writes the file).
                fh.write(json.dumps(state, separators=(",", ":"), sort_keys=True))
            os.replace(tmp, self.state_path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def _load(self) -> dict[str, Any]:
        """Current state for reading, settled to now (nothing is written); creates the file on first use.

        Callers only read it. The last answer is kept while the file (inode, size, modification time)
        and the clock are the same: a driver on a virtual clock reads many times per instant."""
        now = self.clock()
        with self._locked(exclusive=False):
            try:
                st = os.stat(self.state_path)
                key: tuple[object, ...] | None = (st.st_ino, st.st_size, st.st_mtime_ns, now)
            except FileNotFoundError:
                key = None
            if key is not None and key == self._read_key and self._read_state is not None:
                return self._read_state
            state = self._read()
        if state is None:
            with self._locked(exclusive=True):
                state = self._read()
                if state is None:
                    state = self._fresh_state()
                    self._write(state)
        self._settle(state, now)
        self._read_key, self._read_state = key, state
        return state

    @contextlib.contextmanager
    def _mutate(self) -> Iterator[dict[str, Any]]:
        """Read-modify-write under the exclusive lock, settled to now; written back if no error escapes."""
        with self._locked(exclusive=True):
            state = self._read() or self._fresh_state()
            self._settle(state, self.clock())
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
        """Forget every task and checkpoint and reload the cluster spec."""
        with self._locked(exclusive=True):
            self._write(self._fresh_state())

    # ----------------------------------------------------------------- progress (the ground truth)

    def _starting_at(self, task: dict[str, Any]) -> float:
        return float(task.get("starting_at", task["bound_at"] + self.pending_s / self.time_scale))

    def _running_at(self, task: dict[str, Any]) -> float:
        if "running_at" in task:
            return float(task["running_at"])
        return self._starting_at(task) + self.startup_s / self.time_scale

    def _scale(self, task: dict[str, Any]) -> float:
        return float(task.get("time_scale", self.time_scale))

    def _end_candidate(self, task: dict[str, Any]) -> tuple[float, bool]:
        """(clock time at which the task ends if nothing changes, True when that end is its stop)."""
        begin = max(float(task.get("mark", task["bound_at"])), self._running_at(task))
        rate = float(task.get("rate", 1.0))
        left = float(task["run_s"]) - float(task.get("done_s", 0.0))
        natural = begin + max(left, 0.0) / (rate * self._scale(task))
        stop = task.get("stop_at")
        if stop is not None and float(stop) < natural - EPS:
            return max(float(stop), float(task["bound_at"])), True
        return natural, False

    def _advance(self, task: dict[str, Any], t: float) -> None:
        mark = float(task.get("mark", task["bound_at"]))
        begin = max(mark, self._running_at(task))
        if t > begin:
            task["done_s"] = float(task.get("done_s", 0.0)) + float(task.get("rate", 1.0)) * (
                t - begin
            ) * self._scale(task)
        task["mark"] = max(mark, t)

    def _settle(self, state: dict[str, Any], now: float) -> None:
        """Bring progress up to ``now``: end the tasks whose work or grace ran out, in time order,
        re-rating their co-tenants at each end (what happened between two calls, replayed)."""
        tasks = state["tasks"]
        live = [t for t in tasks.values() if t.get("ended_at") is None]
        while live:
            ends = [(self._end_candidate(t), t) for t in live]
            first = min(end for (end, _), _ in ends)
            if first > now + EPS:
                break
            ending = [(t, stopped) for (end, stopped), t in ends if end <= first + EPS]
            for t in live:
                self._advance(t, first)
            for t, stopped in ending:
                self._end(state, t, first, stopped)
            live = [t for t in live if t.get("ended_at") is None]
            self._rerate(state, [t for t, _ in ending])
        for t in live:
            self._advance(t, now)

    def _end(self, state: dict[str, Any], task: dict[str, Any], at: float, stopped: bool) -> None:
        task["ended_at"] = at
        if stopped:
            remaining = max(0.0, float(task["run_s"]) - float(task.get("done_s", 0.0)))
            task["end"] = "preempted"
            task["exit_code"] = None
            task["failure_category"] = ""
            task["message"] = (
                f"{PREEMPTED_PREFIX}: stopped after a grace period of {task.get('grace_s', 0):g} s; "
                f"checkpoint kept with {remaining:.0f} s of work left"
            )
            state["checkpoints"][task["task_id"]] = {
                "job_id": task["job_id"],
                "remaining_s": remaining,
                "checkpoint_dir": task.get("checkpoint_dir", ""),
                "at": at,
            }
        else:
            task["end"] = "exited"
            if task.get("exit_code") == 0:
                # Done: nothing left to resume from.
                state["checkpoints"].pop(task["task_id"], None)

    def _rerate(self, state: dict[str, Any], changed: list[dict[str, Any]]) -> None:
        """New rates for the live tasks whose co-tenants changed (those sharing a GPU with ``changed``)."""
        if self.perf is None:
            return
        spots = {(t["node"], i) for t in changed if t["gpu_milli"] < GPU_MILLI for i in t["gpu_indices"]}
        if not spots:
            return
        for task in state["tasks"].values():
            if (
                task.get("ended_at") is None
                and task["gpu_milli"] < GPU_MILLI
                and any((task["node"], i) in spots for i in task["gpu_indices"])
            ):
                task["rate"] = self._shared_rate(state, task)

    def _shared_rate(self, state: dict[str, Any], task: dict[str, Any]) -> float:
        perf = self.perf
        me = task.get("type_index")
        if perf is None or me is None:
            return 1.0
        gpus = set(task["gpu_indices"])
        others = [
            int(o["type_index"])
            for o in state["tasks"].values()
            if o is not task
            and o.get("ended_at") is None
            and o["node"] == task["node"]
            and o.get("type_index") is not None
            and gpus.intersection(o["gpu_indices"])
        ]
        return perf.shared_rate(int(me), others)

    def _links(self, node_spec: dict[str, Any]) -> dict[tuple[int, int], str]:
        name = node_spec["name"]
        if name not in self._links_cache:
            self._links_cache[name] = node_links(node_spec)
        return self._links_cache[name]

    def _comm_rate(self, state: dict[str, Any], task: dict[str, Any]) -> float:
        """The job's rate on its GPU set relative to the best set of that size (the trace's reference)."""
        from scheduler.sim.perf import best_link, bottleneck_link, comm_rate

        perf = self.perf
        me = task.get("type_index")
        if perf is None or me is None:
            return 1.0
        mine = [
            t
            for t in state["tasks"].values()
            if t["job_id"] == task["job_id"] and t.get("ended_at") is None and t["gpu_milli"] >= GPU_MILLI
        ]
        order = {n["name"]: i for i, n in enumerate(state["nodes"])}
        nodes = sorted({t["node"] for t in mine}, key=lambda n: order.get(n, 0))
        gpus = [i for t in mine for i in t["gpu_indices"]]
        # The trace measured the job on its whole GPU count (the gang's world), not on what is bound yet.
        total = max(len(gpus), int(task.get("world_gpus", len(gpus))))
        first = state["nodes"][order[nodes[0]]]
        links = self._links(first)
        link = "NET" if len(nodes) > 1 else bottleneck_link(links, gpus)
        ref = best_link(links, total, int(first["gpu_count"]))
        fraction = perf.job_types[int(me)].comm_fraction
        return min(1.0, comm_rate(fraction, link) / comm_rate(fraction, ref))

    # ----------------------------------------------------------------- task lifecycle

    def _phase(self, task: dict[str, Any], now: float) -> TaskPhase:
        ended = task.get("ended_at")
        if ended is not None and now >= float(ended) - EPS:
            return TaskPhase.SUCCEEDED if task["exit_code"] == 0 else TaskPhase.FAILED
        if now < self._starting_at(task):
            return TaskPhase.PENDING
        if now < self._running_at(task):
            return TaskPhase.STARTING
        return TaskPhase.RUNNING

    def _prune(self, state: dict[str, Any]) -> None:
        now = self.clock()
        for task_id in [
            tid
            for tid, task in state["tasks"].items()
            if task.get("ended_at") is not None and float(task["ended_at"]) + self.finished_retention_s < now
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

    def _type_index(self, spec: TaskSpec) -> int | None:
        name = spec.env.get(JOB_TYPE_ENV, "").strip()
        if not name or self.perf is None:
            return None
        try:
            return self.perf.index(name)
        except KeyError:
            raise PermanentBackendError(
                f"{JOB_TYPE_ENV}={name!r} is not a job type of the {self.perf.gpu_type} ground truth; "
                f"known: {', '.join(t.name for t in self.perf.job_types[:5])}, ..."
            ) from None

    def _active(self, state: dict[str, Any], now: float) -> list[dict[str, Any]]:
        return [t for t in state["tasks"].values() if not self._phase(t, now).finished]

    def checkpoint_dir(self, job_id: str) -> str:
        """The job's checkpoint folder when the platform names none (kept across its runs)."""
        return str(self.state_path.parent / "checkpoints" / f"job-{job_id}")

    # ----------------------------------------------------------------- ClusterBackend

    def snapshot(self) -> ClusterSnapshot:
        state = self._load()
        now = self.clock()
        nodes = {spec["name"]: self._build_node(spec) for spec in state["nodes"]}
        running: list[Placement] = []
        profiles: dict[str, dict[str, float | str]] = {}
        for task in sorted(self._active(state, now), key=lambda t: (t["bound_at"], t["task_id"])):
            placement = _placement_from(task)
            node = nodes.get(placement.node)
            if node is None:
                continue
            reserve(node, placement)
            running.append(placement)
            profile = self._profile(task)
            if profile:
                profiles[placement.task_id] = profile
        return ClusterSnapshot(nodes=list(nodes.values()), running=running, now=now, task_profiles=profiles)

    def node_list_version(self) -> tuple[object, ...] | None:
        """A value that moves whenever the node list may have changed, from one ``stat`` of the state
        file the nodes live in (its path, inode, size, modification and change times: what ``_load``
        keys its read on); None before the file exists. Task writes move it too, which only costs the
        caller a re-read. Lets a caller keep what it derived from the nodes (jobs.cluster's capacity
        summary) without reading the whole state on every request."""
        try:
            st = os.stat(self.state_path)
        except FileNotFoundError:
            return None
        return (str(self.state_path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def node_list(self) -> tuple[tuple[object, ...], list[Node]]:
        """(node_list_version of the file read, its nodes as built for a snapshot but without their
        tasks' allocations): sizes, GPUs, labels, drivers and whether schedulable. The version is the
        one of the file these nodes come from (read under the lock), so a caller never keeps nodes
        under a newer file's version. Creates the state file on first use, as every read does."""
        with self._locked(exclusive=False):
            try:
                with open(self.state_path) as fh:
                    st = os.fstat(fh.fileno())
                    nodes = self._parse(fh)["nodes"]
            except FileNotFoundError:
                nodes = None
        if nodes is None:
            self.ensure_state()
            return self.node_list()
        version = (str(self.state_path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        return version, [self._build_node(spec) for spec in nodes]

    def job_profile(self, env: dict[str, str]) -> dict[str, float | str]:
        """The solo profile of a job not bound yet whose environment names a job type of the ground
        truth (``SIM_JOB_TYPE``): what the platform's profiler would have stored for it; {} otherwise."""
        name = str(env.get(JOB_TYPE_ENV, "")).strip()
        if self.perf is None or not name:
            return {}
        try:
            idx = self.perf.index(name)
        except KeyError:
            return {}
        return self._type_profile(idx)

    def _profile(self, task: dict[str, Any]) -> dict[str, float | str]:
        """What the node agent would have measured of a task whose job type the ground truth knows:
        the simulator's own profile of that type (so interference predictions match the simulator's)."""
        idx = task.get("type_index")
        if self.perf is None or idx is None:
            return {}
        profile = self._type_profile(int(idx))
        if task.get("slowdown_tolerance") is not None:
            profile["slowdown_tolerance"] = float(task["slowdown_tolerance"])
        return profile

    def _type_profile(self, idx: int) -> dict[str, float | str]:
        assert self.perf is not None
        jt = self.perf.job_types[idx]
        profile: dict[str, float | str] = {
            "model_family": jt.family,
            "job_type": jt.name,
            "batch_size": float(jt.batch_size),
            "gpu_memory_mib": float(jt.memory_mib),
            "solo_throughput": float(self.perf.iso_tput.get(jt.name, 0.0)),
            "job_key": f"gavel:{self.perf.gpu_type}:{jt.name}",
        }
        return profile

    def _build_node(self, spec: dict[str, Any]) -> Node:
        topology: Any = None
        if spec.get("topology_file"):
            topology = topology_from_file(spec["topology_file"], spec["gpu_model"])
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
            topology=topology,
            schedulable=spec.get("schedulable", True),
        )

    def bind(self, spec: TaskSpec, placement: Placement) -> None:
        """Start ``spec`` on ``placement``. Binding the same task to the same place again is a no-op."""
        now = self.clock()
        duration = spec.sim_duration_s if spec.sim_duration_s is not None else self.default_duration_s
        if duration < 0:
            raise PermanentBackendError(f"task {spec.task_id}: negative simulated duration {duration}")
        type_index = self._type_index(spec)
        tolerance = spec.env.get(TOLERANCE_ENV, "").strip()
        with self._mutate() as state:
            existing = state["tasks"].get(spec.task_id)
            if existing is not None and existing.get("ended_at") is None:
                if existing["node"] == placement.node and tuple(existing["gpu_indices"]) == tuple(
                    placement.gpu_indices
                ):
                    return
                raise PlacementConflictError(
                    f"task {spec.task_id} is already bound to {existing['node']} "
                    f"GPUs {existing['gpu_indices']}, not {placement.node} GPUs {list(placement.gpu_indices)}"
                )
            if existing is not None and (
                existing["node"],
                tuple(existing["gpu_indices"]),
                existing["bound_at"],
            ) == (placement.node, tuple(placement.gpu_indices), now):
                return  # the same bind repeated at the same instant after the task already ended
            self._check_fits(state, placement, now)
            checkpoint = state["checkpoints"].get(spec.task_id)
            resume = bool(spec.resume) or checkpoint is not None
            work = float(duration)
            if resume:
                if checkpoint is not None:
                    work = float(checkpoint["remaining_s"])
                work += self.restart_penalty_s
            run_s, exit_code, category, message = self._outcome(spec, work)
            folder = (
                spec.checkpoint_dir
                or (checkpoint or {}).get("checkpoint_dir")
                or self.checkpoint_dir(spec.job_id)
            )
            env = dict(spec.env)
            env["CHECKPOINT_DIR"] = folder
            env["PREEMPTION_GRACE_SECONDS"] = f"{spec.grace_seconds:g}"
            if resume:
                env["RESUME"] = "1"
            starting_at = now + self.pending_s / self.time_scale
            task: dict[str, Any] = {
                "job_id": spec.job_id,
                "task_id": spec.task_id,
                "rank": spec.rank,
                "world_size": spec.world_size,
                "image": spec.image,
                "command": list(spec.command) + list(spec.args),
                "env": env,
                "checkpoint_dir": folder,
                "resume": resume,
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
                "starting_at": starting_at,
                "running_at": starting_at + self.startup_s / self.time_scale,
                "time_scale": self.time_scale,
                "run_s": run_s,
                "done_s": 0.0,
                "mark": now,
                "rate": 1.0,
                "ended_at": None,
                "stop_at": None,
                "type_index": type_index,
                "world_gpus": spec.world_size * len(placement.gpu_indices),
                "slowdown_tolerance": float(tolerance) if tolerance else None,
                "exit_code": exit_code,
                "failure_category": category,
                "message": message,
            }
            state["tasks"][spec.task_id] = task
            if placement.gpu_milli < GPU_MILLI:
                task["rate"] = self._shared_rate(state, task)
                self._rerate(state, [task])
            else:
                rate = self._comm_rate(state, task)
                for other in state["tasks"].values():
                    if other["job_id"] == spec.job_id and other.get("ended_at") is None:
                        other["rate"] = rate

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
            running_at = self._running_at(task)
            failed = phase is TaskPhase.FAILED
            started = now >= running_at and (task.get("ended_at") is None or task["ended_at"] > running_at)
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
                    started_at=running_at if started else None,
                    finished_at=float(task["ended_at"]) if phase.finished else None,
                    # The ground truth's rate with the co-tenants it has now (1.0 without ``perf``).
                    rate=float(task.get("rate", 1.0)) if phase is TaskPhase.RUNNING else None,
                    throughput=(
                        reported_throughput(self.perf, task.get("type_index"), float(task.get("rate", 1.0)))
                        if phase is TaskPhase.RUNNING
                        else None
                    ),
                )
            )
        return out

    def next_event_at(self) -> float | None:
        """The clock time of the next phase change of any task (start, run, end) after now, if
        nothing else changes; None when no task will change. Lets a driver with a virtual clock jump
        straight to it (``manage.py replay``)."""
        state = self._load()
        now = self.clock()
        times: list[float] = []
        for task in state["tasks"].values():
            if task.get("ended_at") is not None:
                continue
            for t in (self._starting_at(task), self._running_at(task), self._end_candidate(task)[0]):
                if t > now + EPS:
                    times.append(t)
                    break
        return min(times) if times else None

    def utilisation(self) -> tuple[float, float]:
        """(allocated GPUs, useful GPUs) now: milli-GPU held / 1000, and the simulator's useful
        throughput, each task's GPUs times its rate (a shared task counts one GPU at its rate)."""
        state = self._load()
        now = self.clock()
        alloc = useful = 0.0
        for task in self._active(state, now):
            gpus = len(task["gpu_indices"])
            alloc += gpus * task["gpu_milli"] / GPU_MILLI
            if now >= self._running_at(task):
                useful += (gpus if task["gpu_milli"] >= GPU_MILLI else 1) * float(task.get("rate", 1.0))
        return alloc, useful

    def shared_gpus(self) -> int:
        """GPUs with two or more live tenants now."""
        state = self._load()
        count: dict[tuple[str, int], int] = {}
        for task in self._active(state, self.clock()):
            if task["gpu_milli"] < GPU_MILLI:
                for i in task["gpu_indices"]:
                    count[(task["node"], i)] = count.get((task["node"], i), 0) + 1
        return sum(1 for c in count.values() if c > 1)

    def workspace_target(self, job_id: str) -> str | None:
        """A running workspace's server: the stand-in page (scheduler.backends.standin_server)."""
        from scheduler.backends import standin_server

        running = any(s.phase is TaskPhase.RUNNING for s in self.task_statuses(job_id))
        return standin_server.ensure_started() if running else None

    def delete_job(self, job_id: str) -> None:
        with self._mutate() as state:
            gone = [t for t in state["tasks"].values() if t["job_id"] == job_id]
            for task in gone:
                del state["tasks"][task["task_id"]]
            self._rerate(state, [t for t in gone if t.get("ended_at") is None])

    def preempt_job(self, job_id: str, grace_seconds: float) -> None:
        """SIGTERM the job's live tasks: they stop ``grace_seconds`` simulated seconds from now (at
        once for 0), keeping a checkpoint of their progress; see the module docstring. Idempotent: a
        second call never extends a grace period already running."""
        if grace_seconds < 0:
            raise PermanentBackendError(f"grace_seconds must be >= 0, got {grace_seconds}")
        now = self.clock()
        with self._mutate() as state:
            live = [t for t in state["tasks"].values() if t["job_id"] == job_id and t.get("ended_at") is None]
            for task in live:
                stop = now + grace_seconds / self._scale(task)
                if task.get("stop_at") is None or stop < float(task["stop_at"]):
                    task["stop_at"] = stop
                    task["grace_s"] = grace_seconds
            # A zero grace ends the tasks now: settle so that this write already shows them stopped.
            self._settle(state, now)

    def logs(self, job_id: str, task_id: str) -> str:
        state = self._load()
        task = state["tasks"].get(task_id)
        if task is None or task["job_id"] != job_id:
            return ""
        now = self.clock()
        phase = self._phase(task, now)
        running = self._running_at(task)
        lines = [f"[sim] task {task_id} bound to {task['node']} GPUs {task['gpu_indices']}"]
        if task.get("resume"):
            lines.append(f"[sim] resuming from {task.get('checkpoint_dir', '')} (RESUME=1)")
        if phase is not TaskPhase.PENDING:
            lines.append(f"[sim] pulling image {task['image'] or '(none)'}")
        if now >= running:
            lines.append(f"[sim] running: {' '.join(task['command'])}")
            end = float(task["ended_at"]) if task.get("ended_at") is not None else now
            sim_elapsed = (min(now, end) - running) * self._scale(task)
            for step in range(1, min(int(sim_elapsed // 60), 20) + 1):
                lines.append(f"[sim] minute {step}: training step {step * 100}")
        if phase.finished and task.get("end") == "preempted":
            lines.append(f"[sim] {task['message']}")
        elif phase.finished and task["exit_code"] is None:
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

"""Data model of the scheduler: dataclasses in, dataclasses out.

Units everywhere: CPU in milli-cores, memory in MiB, GPU compute in milli-GPU (1000 = one whole GPU),
GPU memory in MiB. A task asks either for ``gpus`` whole GPUs, or for one shared GPU with
``gpu_milli`` in 1..999 (and optionally ``gpu_memory_mib``). See docs/fractional-gpu.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GPU_MILLI = 1000


@dataclass
class Gpu:
    """One physical GPU of a node and what is already allocated on it."""

    index: int
    model: str = ""
    memory_mib: int = 0
    used_milli: int = 0
    used_memory_mib: int = 0
    uuid: str = ""
    # ids of tasks (``Placement.task_id``) sharing this GPU; used by interference-aware plugins.
    tenants: list[str] = field(default_factory=list)
    # Measured SM utilisation in % (node agent / NVML); None where nothing measures it.
    utilization_pct: float | None = None

    @property
    def free_milli(self) -> int:
        return GPU_MILLI - self.used_milli

    @property
    def free_memory_mib(self) -> int:
        return self.memory_mib - self.used_memory_mib

    @property
    def is_idle(self) -> bool:
        return self.used_milli == 0 and self.used_memory_mib == 0


@dataclass
class Node:
    """A schedulable machine. ``topology`` is a ``scheduler.topology`` object or None (unknown links)."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: list[Gpu] = field(default_factory=list)
    used_cpu_milli: int = 0
    used_memory_mib: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    driver_version: str = ""
    cuda_version: str = ""
    topology: Any = None
    schedulable: bool = True

    @property
    def free_cpu_milli(self) -> int:
        return self.cpu_milli - self.used_cpu_milli

    @property
    def free_memory_mib(self) -> int:
        return self.memory_mib - self.used_memory_mib

    @property
    def gpu_model(self) -> str:
        return self.gpus[0].model if self.gpus else ""


@dataclass
class TaskRequest:
    """One task (pod) of a job. ``gpus`` whole GPUs, or a share of one GPU via ``gpu_milli``."""

    task_id: str
    cpu_milli: int = 0
    memory_mib: int = 0
    gpus: int = 0
    gpu_milli: int = 0
    gpu_memory_mib: int = 0
    # Acceptable GPU models; empty means any.
    gpu_models: tuple[str, ...] = ()

    @property
    def is_shared(self) -> bool:
        return self.gpus == 0 and 0 < self.gpu_milli < GPU_MILLI

    @property
    def total_gpu_milli(self) -> int:
        return self.gpus * GPU_MILLI if self.gpus else self.gpu_milli


@dataclass
class JobRequest:
    """A job waiting to be placed: its tasks are a gang, placed all together or not at all."""

    job_id: str
    tasks: list[TaskRequest]
    priority: int = 0
    submitted_at: float = 0.0
    team: str = ""
    user: str = ""
    # Largest predicted slowdown (>= 1.0) this job accepts when sharing a GPU.
    slowdown_tolerance: float = 1.5
    # Solo profile for interference prediction (keys in scheduler.interference.features), if known.
    profile: dict[str, float | str] = field(default_factory=dict)
    # Free-form hints, e.g. {"model_family": "resnet"} or {"min_driver": "535"}.
    hints: dict[str, str] = field(default_factory=dict)
    # Policy inputs (scheduler.policy): GPU-seconds run over all earlier runs, whether and when the job
    # may be preempted, and whether a 1-GPU job may be packed onto a share of a GPU.
    attained_gpu_s: float = 0.0
    preemptible: bool = True
    min_runtime_s: float = 0.0
    allow_sharing: bool = False
    # Queue class for service-history statistics (Gittins index): trace group, or image name.
    group: str = ""
    # Expected run time (s) when known: the oracle of SJF in the simulator, max_runtime on the platform.
    expected_duration_s: float | None = None


@dataclass
class Placement:
    """Where one task goes (or is running). ``gpu_milli``/``gpu_memory_mib`` are per GPU used."""

    job_id: str
    task_id: str
    node: str
    gpu_indices: tuple[int, ...] = ()
    gpu_milli: int = 0
    gpu_memory_mib: int = 0
    cpu_milli: int = 0
    memory_mib: int = 0
    # Human-readable explanation (scores, predicted slowdown, link class) for the user.
    reason: str = ""
    predicted_slowdown: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "task_id": self.task_id,
            "node": self.node,
            "gpu_indices": list(self.gpu_indices),
            "gpu_milli": self.gpu_milli,
            "gpu_memory_mib": self.gpu_memory_mib,
            "cpu_milli": self.cpu_milli,
            "memory_mib": self.memory_mib,
            "reason": self.reason,
            "predicted_slowdown": self.predicted_slowdown,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Placement:
        """Inverse of ``to_dict``. Ids and node are required (KeyError); the rest default, so a
        record written before a field existed still reads. Raises TypeError/ValueError on bad values."""
        slowdown = data.get("predicted_slowdown")
        return cls(
            job_id=str(data["job_id"]),
            task_id=str(data["task_id"]),
            node=str(data["node"]),
            gpu_indices=tuple(int(i) for i in data.get("gpu_indices", ())),
            gpu_milli=int(data.get("gpu_milli", 0)),
            gpu_memory_mib=int(data.get("gpu_memory_mib", 0)),
            cpu_milli=int(data.get("cpu_milli", 0)),
            memory_mib=int(data.get("memory_mib", 0)),
            reason=str(data.get("reason", "")),
            predicted_slowdown=None if slowdown is None else float(slowdown),
        )


@dataclass
class ClusterSnapshot:
    """The cluster as the backend sees it: nodes with their usage, and the running placements."""

    nodes: list[Node]
    running: list[Placement] = field(default_factory=list)
    now: float = 0.0
    # task id -> solo profile of a running task (``JobRequest.profile`` keys, plus an optional
    # "slowdown_tolerance"), read by interference-aware plugins; empty when unknown.
    task_profiles: dict[str, dict[str, float | str]] = field(default_factory=dict)

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def copy(self) -> ClusterSnapshot:
        """Working copy for one scheduling cycle.

        What ``schedule()`` reserves on is copied: every node, its GPUs, their tenant lists and the
        node's labels. Running placements and node topologies are shared: the scheduler never mutates
        them. (A ``copy.deepcopy`` was the simulator's bottleneck: it copied every placement string.)
        """
        return ClusterSnapshot(
            nodes=[_copy_node(n) for n in self.nodes],
            running=list(self.running),
            now=self.now,
            task_profiles=self.task_profiles,
        )

    @property
    def total_gpus(self) -> int:
        return sum(len(n.gpus) for n in self.nodes)


def _copy_node(node: Node) -> Node:
    # Field-wise copy through __dict__: several times faster than copy.copy on dataclasses.
    clone = object.__new__(type(node))
    clone.__dict__.update(node.__dict__)
    clone.gpus = [_copy_gpu(g) for g in node.gpus]
    clone.labels = dict(node.labels)
    return clone


def _copy_gpu(gpu: Gpu) -> Gpu:
    clone = object.__new__(type(gpu))
    clone.__dict__.update(gpu.__dict__)
    clone.tenants = list(gpu.tenants)
    return clone


@dataclass(frozen=True)
class Eviction:
    """A running job to preempt (a gang is always evicted whole).

    ``rule`` names the policy rule that chose it (``scheduler.policy`` documents each one, e.g.
    ``las-level``, ``priority``, ``unpack``, ``unpack-idle``, ``reclaim``); ``preemptor`` is the waiting
    job whose need caused it, or "" when no single job did (unpacking a slow co-location)."""

    job_id: str
    rule: str
    preemptor: str = ""
    reason: str = ""


@dataclass(frozen=True)
class Migration:
    """A running job moved: preempted, and placed again in the same cycle on ``to``.

    ``to`` is empty when the policy frees the job's GPUs for ``preemptor`` and leaves the new place to
    the next placement pass of the same cycle (the job is then also in ``Decision.placements``)."""

    job_id: str
    from_nodes: tuple[str, ...]
    rule: str = "drain"
    preemptor: str = ""
    reason: str = ""
    to: tuple[Placement, ...] = ()


@dataclass
class Decision:
    """The outcome of one scheduling cycle."""

    placements: list[Placement] = field(default_factory=list)
    # job_id -> user-facing reason why it was not placed this cycle.
    unschedulable: dict[str, str] = field(default_factory=dict)
    # Running jobs to preempt before the placements are applied.
    evictions: list[Eviction] = field(default_factory=list)
    # Running jobs to move (preempt, then place again this cycle).
    migrations: list[Migration] = field(default_factory=list)
    # job_id -> 1-based position in the cluster queue of every job still waiting after this cycle.
    positions: dict[str, int] = field(default_factory=dict)
    # The rule that ordered the queue, for users ("2D-LAS with the Gittins index", "FIFO", ...).
    queue_order: str = ""

    def placements_for(self, job_id: str) -> list[Placement]:
        return [p for p in self.placements if p.job_id == job_id]


# -- node accounting: one definition for the engine, the policies, the simulator and the backends --


def reserve(node: Node, placement: Placement) -> None:
    """Account a placement on a node (a working copy: callers copy before they plan)."""
    node.used_cpu_milli += placement.cpu_milli
    node.used_memory_mib += placement.memory_mib
    for idx in placement.gpu_indices:
        gpu = node.gpus[idx]
        gpu.used_milli += placement.gpu_milli
        gpu.used_memory_mib += placement.gpu_memory_mib
        gpu.tenants.append(placement.task_id)


def unreserve(node: Node, placement: Placement) -> None:
    """Undo ``reserve``."""
    node.used_cpu_milli -= placement.cpu_milli
    node.used_memory_mib -= placement.memory_mib
    for idx in placement.gpu_indices:
        gpu = node.gpus[idx]
        gpu.used_milli -= placement.gpu_milli
        gpu.used_memory_mib -= placement.gpu_memory_mib
        if placement.task_id in gpu.tenants:
            gpu.tenants.remove(placement.task_id)


def placement_for(task: TaskRequest, job: JobRequest, node: Node, gpus: tuple[int, ...]) -> Placement:
    """The placement of ``task`` of ``job`` on ``node``'s GPUs ``gpus`` (none for a CPU task)."""
    per_gpu_milli = GPU_MILLI if task.gpus else task.gpu_milli
    per_gpu_mem = task.gpu_memory_mib
    if task.gpus and not per_gpu_mem:
        # A whole GPU owns all of its memory.
        per_gpu_mem = node.gpus[gpus[0]].memory_mib if gpus else 0
    return Placement(
        job_id=job.job_id,
        task_id=task.task_id,
        node=node.name,
        gpu_indices=gpus,
        gpu_milli=per_gpu_milli if gpus else 0,
        gpu_memory_mib=per_gpu_mem if gpus else 0,
        cpu_milli=task.cpu_milli,
        memory_mib=task.memory_mib,
    )

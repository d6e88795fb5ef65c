"""The simulator's records: its configuration, a trace job's state, and a run's raw outcome."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scheduler.model import JobRequest, Placement
from scheduler.sim.trace import TraceJob

PENDING, RUNNING, DONE = 0, 1, 2
# (node group, resident job types, free milli-GPU, free GPU memory MiB) of a GPU with room and residents.
SlotKind = tuple[int, tuple[int, ...], int, int]
EPS = 1e-9


@dataclass
class SimConfig:
    seed: int = 0
    window: int = 64
    cycle_s: float = 10.0
    max_calls_per_cycle: int = 8
    scan_limit: int = 4096
    round_s: float = 360.0
    preempt_penalty_s: float = 30.0
    slowdown_tolerance: float = 1.5


class _Job:
    __slots__ = (
        "idx",
        "trace",
        "type_idx",
        "mem_mib",
        "request",
        "state",
        "remaining",
        "rate",
        "last",
        "first_start",
        "finish",
        "attained",
        "run_since",
        "gpu_eq",
        "placements",
        "gids",
        "version",
        "key",
        "violated",
        "violations",
        "preemptions",
        "shared",
        "started_at",
        "avoid",
        "tenant_profile",
        "shape",
        "sizes",
        "class_key",
        "class_at",
    )

    def __init__(self, idx: int, trace: TraceJob, type_idx: int, mem_mib: int) -> None:
        self.idx = idx
        self.trace = trace
        self.type_idx = type_idx
        self.mem_mib = mem_mib
        self.request: JobRequest | None = None
        self.state = PENDING
        self.remaining = trace.duration
        self.rate = 0.0
        self.last = 0.0
        self.first_start: float | None = None
        self.finish: float | None = None
        self.attained = 0.0
        self.run_since = 0.0
        self.gpu_eq = 0.0
        self.placements: list[Placement] = []
        self.gids: list[int] = []
        self.version = 0
        self.key: tuple[float, ...] = ()
        self.violated = False
        self.violations = 0
        self.preemptions = 0
        self.shared = False
        self.started_at = 0.0
        self.avoid: set[int] = set()
        self.tenant_profile: dict[str, float | str] = {}
        self.shape: tuple[tuple[int, int, int], ...] = ()
        self.sizes: tuple[int, ...] = ()  # whole-GPU task sizes, largest first
        # ``SimOffer._class`` of the job and the size of ``avoid`` it was made for (a set that only
        # grows; shape, type and sharing are fixed once the job is made).
        self.class_key: tuple[object, ...] = ()
        self.class_at = -1


@dataclass
class SimResult:
    """Raw outcome of one run; ``scheduler.sim.metrics`` summarises it."""

    policy: str
    cluster: str
    total_gpus: int
    submit: np.ndarray
    first_start: np.ndarray
    finish: np.ndarray
    num_gpus: np.ndarray
    duration: np.ndarray
    # Change points: time, allocated GPUs (milli/1000), useful GPUs (sum gpus*rate), waiting jobs.
    t: np.ndarray
    alloc: np.ndarray
    useful: np.ndarray
    waiting: np.ndarray
    placements: int
    violations: int
    preemptions: int
    schedule_calls: int
    wall_s: float
    finished_count: np.ndarray = field(default_factory=lambda: np.zeros(0))
    unpacks_on_idle: int = 0
    migrations: int = 0
    skipped_offers: int = 0
    deferred_offers: int = 0

"""Queue sort (an extension point): the order in which waiting jobs are offered.

Orders (``Policy.order``; ``job_key`` for the platform's ``JobRequest``s, ``QueuePriority`` for the
simulator's trace jobs: the same keys):

- ``fifo``: submit time.
- ``priority``: the platform's order before ``plan_cycle``: priority high first, then the team's
  share of the GPUs held now (low first: fair share), then submit time.
- ``sjf``: the job's expected duration (``JobRequest.expected_duration_s``; the trace duration in
  the simulator, an oracle), then submit time; unknown durations last.
- ``las``: 2D-LAS levels with an order inside a level (below).

``JobRequest.priority`` (an int, higher first) leads every order of ``plan_cycle``: a priority class
is served, and preempts (``scheduler.policy.preemption``), before a lower one; the order above sorts
jobs of equal priority. Trace jobs all have priority 0.

2D-LAS: the levels, the order inside a level, and the online service history that a Gittins index
is computed from.

A job's *attained service* is GPU-seconds it has run (GPUs x wall seconds, Tiresias' 2D measure).
Its *level* is the number of ``Policy.las_thresholds`` that the attained service has crossed; a lower
level is served first and preempts a higher one at the next round (levels alone decide preemption,
so a finer order inside a level cannot make two jobs swap back and forth every round).

Order inside a level (``Policy.las_inner``):
- ``fifo``: submit time (Tiresias).
- ``attained``: least attained service first (LAS inside the level), then submit time.
- ``gittins``: highest Gittins index first, from the attained service of the jobs *completed so far*
  (never a job's own future, never a job not yet finished), per class (trace group, GPU count) when
  that class has ``min_samples`` completions, else over all completed jobs; with fewer than that in
  all, least attained first.

The Gittins index of a job that has attained ``a`` under the service distribution ``S`` is
``max over d > 0 of P(S <= a + d | S > a) / E[min(S, a + d) - a | S > a]``: the best rate at which
more service buys completion probability (per GPU-second). It is the optimal priority for mean
completion time when sizes are unknown but their distribution is known; for heavy-tailed
distributions it falls with attained service (LAS-like) and it orders classes by their odds of
finishing soon. Evaluated on a fixed grid of attained service (step function, the grid point at or
below), recomputed per class when its sample count grew by ``REFRESH_GROWTH``. A key is computed when
the job enters the queue (arrival or preemption) from the history of that moment and kept while it
waits (its attained service does not change; the history does, slowly): so a job keyed before any
history existed keeps its least-attained key, which sorts after the index keys of its level.
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from scheduler.model import JobRequest

# Attained-service grid (GPU-seconds) the index is evaluated on: 0, then geometric 60 s .. ~3 years.
GRID_GPU_S = np.concatenate([[0.0], np.geomspace(60.0, 1e8, 65)])
REFRESH_GROWTH = 0.1
MIN_SAMPLES = 50


def las_level(thresholds: tuple[float, ...], attained_gpu_s: float) -> int:
    return bisect.bisect_right(thresholds, attained_gpu_s)


def gittins_on_grid(samples: np.ndarray, grid: np.ndarray = GRID_GPU_S) -> np.ndarray:
    """Gittins index of the empirical distribution ``samples`` at each attained value of ``grid``
    (0 where no sample exceeds it: nothing known beyond, lowest priority)."""
    s = np.sort(np.asarray(samples, dtype=float))
    csum = np.concatenate([[0.0], np.cumsum(s)])
    out = np.zeros(len(grid))
    for g, a in enumerate(grid):
        i = int(np.searchsorted(s, a, side="right"))
        rest = s[i:]
        n = len(rest)
        if n == 0:
            continue
        k = np.arange(1, n + 1)
        # Stopping at the j-th larger sample: k_j jobs finish, having spent their own (s - a) each,
        # and the n - k_j still running have spent (s_j - a) each.
        spent = (csum[i + 1 :] - csum[i]) - k * a + (n - k) * (rest - a)
        ok = spent > 0
        if ok.any():
            out[g] = float(np.max(k[ok] / spent[ok]))
    return out


class ServiceHistory:
    """Attained service of completed jobs, per class and overall, with memoised Gittins grids."""

    def __init__(self, min_samples: int = MIN_SAMPLES) -> None:
        self.min_samples = min_samples
        self.samples: dict[object, list[float]] = {}
        self._grids: dict[object, tuple[int, np.ndarray]] = {}

    def add(self, cls: object, service_gpu_s: float) -> None:
        self.samples.setdefault(cls, []).append(service_gpu_s)
        self.samples.setdefault(None, []).append(service_gpu_s)

    def _grid(self, cls: object) -> np.ndarray | None:
        samples = self.samples.get(cls)
        if samples is None or len(samples) < self.min_samples:
            return None
        have = self._grids.get(cls)
        if have is None or len(samples) > have[0] * (1 + REFRESH_GROWTH):
            have = self._grids[cls] = (len(samples), gittins_on_grid(np.array(samples)))
        return have[1]

    def gittins(self, cls: object, attained_gpu_s: float) -> float | None:
        """Index of a job of ``cls`` that has attained this much, or None without enough history."""
        grid = self._grid(cls)
        if grid is None:
            grid = self._grid(None)
        if grid is None:
            return None
        return float(grid[int(np.searchsorted(GRID_GPU_S, attained_gpu_s, side="right")) - 1])


class QueuePriority:
    """Queue keys of one run: ``(level, inner..., submit, idx)``, level first. Tiresias (``fifo``
    inside) gets ``(level, submit, idx)``."""

    def __init__(self, thresholds: tuple[float, ...], inner: str) -> None:
        if inner not in ("fifo", "attained", "gittins"):
            raise ValueError(f"unknown order inside a LAS level {inner!r}")
        self.thresholds = thresholds
        self.inner = inner
        self.history = ServiceHistory()

    @staticmethod
    def job_class(group: str, num_gpus: int) -> tuple[str, int]:
        return (group, num_gpus)

    def key(self, attained: float, group: str, num_gpus: int, submit: float, idx: int) -> tuple[float, ...]:
        return (*las_key(self.thresholds, self.inner, self.history, attained, (group, num_gpus), submit), idx)

    def completed(self, group: str, num_gpus: int, attained: float) -> None:
        if self.inner == "gittins":
            self.history.add(self.job_class(group, num_gpus), attained)


def trace_key(
    order: str,
    priority: QueuePriority,
    *,
    attained: float,
    group: str,
    num_gpus: int,
    submit: float,
    duration: float,
    idx: int,
) -> tuple[float, ...]:
    """Queue key of a simulated trace job (lower first; ties by trace order ``idx``): ``fifo`` ->
    ``(submit, idx)``, ``sjf`` -> ``(duration, submit, idx)``, ``las`` -> ``priority.key(...)``. Trace
    jobs have no priority classes, so unlike ``job_key`` no priority leads."""
    if order == "fifo":
        return (submit, idx)
    if order == "sjf":
        return (duration, submit, idx)
    return priority.key(attained, group, num_gpus, submit, idx)


def las_key(
    thresholds: tuple[float, ...],
    inner: str,
    history: ServiceHistory | None,
    attained: float,
    cls: object,
    submit: float,
) -> tuple[float, ...]:
    """2D-LAS key ``(level, inner..., submit)``: ``fifo`` -> ``(level, submit)``; ``gittins`` ->
    ``(level, -index, submit)`` with enough history, else ``(level, attained, submit)`` (as
    ``attained``)."""
    level = float(las_level(thresholds, attained))
    if inner == "fifo":
        return (level, submit)
    if inner == "gittins" and history is not None:
        index = history.gittins(cls, attained)
        if index is not None:
            return (level, -index, submit)
    return (level, attained, submit)


def job_gpus(request: JobRequest) -> int:
    """GPUs a job holds as 2D-LAS counts attained service: whole GPUs, or one per shared task."""
    return sum(t.gpus if t.gpus else (1 if t.gpu_milli else 0) for t in request.tasks)


def job_key(
    order: str,
    request: JobRequest,
    *,
    thresholds: tuple[float, ...] = (),
    inner: str = "fifo",
    history: ServiceHistory | None = None,
    team_share: float = 0.0,
) -> tuple[float | str, ...]:
    """Queue key of a platform job under ``order`` (lower first), priority leading."""
    tail = (request.submitted_at, request.job_id)
    if order == "fifo":
        return (-request.priority, *tail)
    if order == "priority":
        return (-request.priority, team_share, *tail)
    if order == "sjf":
        duration = request.expected_duration_s
        return (-request.priority, duration if duration is not None else math.inf, *tail)
    if order == "las":
        cls = (request.group, job_gpus(request))
        key = las_key(thresholds, inner, history, request.attained_gpu_s, cls, request.submitted_at)
        return (-request.priority, *key, request.job_id)
    raise ValueError(f"unknown queue order {order!r}; known: fifo, priority, sjf, las")


def describe(order: str, thresholds: tuple[float, ...] = (), inner: str = "fifo") -> str:
    """The queue order in words (the platform shows it with each waiting job's position)."""
    if order == "fifo":
        return "priority, then submit time"
    if order == "priority":
        return "priority, then team share, then submit time"
    if order == "sjf":
        return "priority, then shortest expected duration"
    levels = ", ".join(f"{t / 3600:g}" for t in thresholds)
    within = {"fifo": "submit time", "attained": "least attained", "gittins": "Gittins index"}[inner]
    return f"priority, then 2D-LAS level (thresholds {levels} GPU-h), then {within}"

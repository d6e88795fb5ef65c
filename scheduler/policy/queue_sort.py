"""Queue priority of the preemptive (2D-LAS family) policies: levels, the order inside a level, and
the online service history that a Gittins index is computed from.

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

import numpy as np

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
    """Queue keys of one run: ``(level, inner..., submit, idx)``, level first (``_las_preempt`` reads
    ``key[0]``). Tiresias (``fifo`` inside) gets ``(level, submit, idx)``."""

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
        level = float(las_level(self.thresholds, attained))
        if self.inner == "fifo":
            return (level, submit, idx)
        if self.inner == "gittins":
            index = self.history.gittins(self.job_class(group, num_gpus), attained)
            if index is not None:
                return (level, -index, submit, idx)
        return (level, attained, submit, idx)

    def completed(self, group: str, num_gpus: int, attained: float) -> None:
        if self.inner == "gittins":
            self.history.add(self.job_class(group, num_gpus), attained)

"""The workload mix observed so far, as a target workload that refreshes as arrivals accumulate.

FGD measures fragmentation against the workload to come. The paper's simulator takes it from the
whole trace in advance; a real scheduler only knows what has arrived. ``WorkloadHistory`` counts task
shapes on arrival and rebuilds its ``TargetWorkload`` when the count has grown by ``refresh_growth``
(10 %) since the last rebuild (and at least every ``refresh_every`` arrivals), so score caches are
flushed O(log n) times rather than on every arrival.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from scheduler.frag.fragmentation import ShapeKey, TargetWorkload, task_shape
from scheduler.model import TaskRequest

HISTORY_KEY = "workload_history"


@dataclass
class WorkloadHistory:
    coverage: float = 0.95
    with_memory: bool = False
    refresh_growth: float = 0.10
    refresh_every: int = 2000
    counts: Counter[ShapeKey] = field(default_factory=Counter)
    total: int = 0
    _built_at: int = -1
    _workload: TargetWorkload | None = None
    _version: int = 0

    def observe(self, task: TaskRequest) -> None:
        self.counts[task_shape(task, self.with_memory)] += 1
        self.total += 1

    def workload(self) -> TargetWorkload:
        """The current target workload (rebuilt when enough new arrivals have been seen)."""
        grown = self.total - self._built_at
        if self._workload is None or (
            grown > 0 and (grown >= self.refresh_growth * max(self._built_at, 1) or grown >= self.refresh_every)
        ):
            self._version += 1
            self._workload = TargetWorkload.from_counts(self.counts, self.coverage, self.with_memory)
            self._workload.version = self._version
            self._built_at = self.total
        return self._workload

"""The waiting queue: one sorted list per request shape, keyed by the policy's queue order
(``scheduler.policy.queue_sort``), so a cycle skips whole shapes that cannot fit."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterator

from scheduler.policy.queue_sort import trace_key
from scheduler.sim.rates import SimRates
from scheduler.sim.records import PENDING, _Job


class SimQueue(SimRates):
    def _key(self, job: _Job) -> tuple[float, ...]:
        tj = job.trace
        return trace_key(
            self.policy.order, self.priority, attained=job.attained, group=tj.group,
            num_gpus=tj.num_gpus, submit=tj.submit, duration=tj.duration, idx=job.idx,
        )  # fmt: skip

    # The queue is one sorted list per request shape: a cycle skips whole shapes that cannot fit
    # and merges the rest in key order, instead of rescanning a long prefix of jobs that wait for
    # more GPUs than are free.
    def _enqueue(self, job: _Job) -> None:
        job.state = PENDING
        job.key = self._key(job)
        bisect.insort(self.buckets.setdefault(job.shape, []), (job.key, job.idx))
        self.waiting += 1

    def _dequeue(self, job: _Job) -> None:
        bucket = self.buckets[job.shape]
        del bucket[bisect.bisect_left(bucket, (job.key, job.idx))]
        self.waiting -= 1

    def _queue_alive(
        self, shapes_ok: Callable[[_Job], bool], dead: set[tuple[tuple[int, int, int], ...]]
    ) -> Iterator[int]:
        """Like ``_queue_in_order``, but a shape added to ``dead`` while iterating yields no more jobs
        (k-way merge over the shape lists, each advanced only while its shape is alive)."""
        lists = [b for b in self.buckets.values() if b and shapes_ok(self.jobs[b[0][1]])]
        heap = [(b[0], i, 0) for i, b in enumerate(lists)]
        heapq.heapify(heap)
        while heap:
            (_, idx), i, pos = heapq.heappop(heap)
            bucket = lists[i]
            if self.jobs[idx].shape in dead:
                continue
            yield idx
            if pos + 1 < len(bucket) and self.jobs[idx].shape not in dead:
                heapq.heappush(heap, (bucket[pos + 1], i, pos + 1))

    def _queue_in_order(self, shapes_ok: Callable[[_Job], bool] | None = None) -> Iterator[int]:
        """Waiting job indices in queue order, only from shapes ``shapes_ok`` accepts."""
        lists = []
        for bucket in self.buckets.values():
            if bucket and (shapes_ok is None or shapes_ok(self.jobs[bucket[0][1]])):
                lists.append(bucket)
        if len(lists) == 1:
            return (idx for _, idx in lists[0])
        return (idx for _, idx in heapq.merge(*lists))

"""Preemption (a PostFilter): which running jobs a waiting job may evict, and which it does.

Rules (each ``Eviction`` names its rule and its preemptor):

- ``las``: 2D-LAS levels. A running job in a higher level (more attained service) than a waiting
  job may be evicted for it; levels alone decide, so a finer order inside a level cannot make two
  jobs swap back and forth every round.
- ``priority``: a waiting job of a higher ``JobRequest.priority`` may evict a running job of a
  lower one, whatever their levels (a priority class outranks LAS; LAS orders jobs of equal
  priority).

Never evicted: a job with ``preemptible=False``; a job whose current run is younger than its
``min_runtime_s``. A gang (a job of several tasks) is evicted whole: an eviction names the job, and
every task of it frees its GPUs.

The walk (``choose_victims``), shared by the platform's ``plan_cycle`` and the simulator's rounds:
waiting jobs in queue order (at most ``window``) each take their need from the idle GPUs; while a
job's need exceeds what is idle, it takes the next candidate it outranks (candidates sorted lowest
priority first: highest level, then most recently started), counting the GPUs a candidate frees (a
shared GPU becomes idle when all of its tenants are chosen). The first job whose need cannot be met
stops the walk (the queue is served in order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

EPS = 1e-9
V = TypeVar("V")
W = TypeVar("W")


def may_evict(preemptible: bool, started_at: float, min_runtime_s: float, now: float) -> bool:
    """The preemption guards: preemptible, and the current run at least ``min_runtime_s`` old."""
    return preemptible and now - started_at >= min_runtime_s - EPS


def choose_victims(
    waiting: Iterable[tuple[W, float]],
    candidates: Sequence[V],
    outranks: Callable[[W, V], bool],
    frees: Callable[[V, set[V]], float],
    idle: float,
) -> list[tuple[V, W]]:
    """(victim, preemptor) pairs, in the order chosen.

    ``waiting``: (job, idle GPUs it needs) in queue order; ``candidates``: running jobs that may be
    evicted, lowest priority first; ``outranks(job, victim)``: whether the waiting job may evict the
    victim (candidates it does not outrank stop its walk, as they are sorted); ``frees(victim,
    chosen)``: idle GPUs gained by also choosing ``victim`` (``chosen`` includes it); ``idle``: idle
    GPUs now."""
    chosen: list[tuple[V, W]] = []
    chosen_set: set[V] = set()
    free = idle
    v = 0
    for job, need in waiting:
        while free < need - EPS and v < len(candidates) and outranks(job, candidates[v]):
            victim = candidates[v]
            chosen.append((victim, job))
            chosen_set.add(victim)
            free += frees(victim, chosen_set)
            v += 1
        if free < need - EPS:
            break
        free -= need
    return chosen

"""The platform's queue ETAs during ``manage.py replay --eta-json``, against the jobs' actual starts
(issue 17, item 5, the replay half of ``python -m scheduler eta-accuracy``).

- **The estimates are the platform's:** ``jobs.queue_eta.refresh_etas``, the function whose results
  the API shows as ``eta`` / ``eta_confidence``. The cycle calls it at its rounds; the replay records
  what each call returned (``EtaLog.recording`` wraps the name the cycle calls). As the simulator's
  recorder (``scheduler.bench.eta_accuracy.EtaRecorder``) does, the replay also calls it after a
  cycle that leaves a job in the queue that has no estimate yet (its estimate when it entered the
  queue), over the view the next cycle would see (``jobs.scheduling.build_view``, not a round). The
  platform refreshes only at rounds, so without these entry estimates the API shows none for up to
  one round: ``score`` also reports the points scored on the rounds' estimates alone.
- **Scoring** is the simulator's, imported: ``scheduler.bench.eta_accuracy.eta_errors`` (at each
  tenth of the wait of each job that waited at least ``min_wait_s``, the estimate shown then against
  the first start, over the wait; unknown estimates counted apart) and the same summary fields as
  ``docs/results/eta_*.json``. Actual start: the job's first start (``Job.started_at``, as the
  replay's metrics). Times are the replay's virtual seconds.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jobs import queue_eta, scheduling
from jobs.models import Job
from jobs.policy_settings import active_policy
from jobs.states import JobStatus
from scheduler.backends.base import ClusterBackend
from scheduler.bench.eta_accuracy import TENTHS, eta_errors, shown_at
from scheduler.bench.fairness_metrics import percentile

ENTRY = "entry"
ROUND = "round"
MIN_WAIT_S = 60.0  # the simulator's default (``eta-accuracy --min-wait-s``)


@dataclass
class EtaLog:
    """Estimates the platform made during a replay: job pk -> [(made at, start or None, kind,
    confidence)]."""

    epoch: float
    estimates: dict[int, list[tuple[float, float | None, str, str]]] = field(default_factory=dict)
    refreshes: dict[str, int] = field(default_factory=lambda: {ENTRY: 0, ROUND: 0})
    _tried: set[int] = field(default_factory=set)

    def add(self, made_at: float, etas: dict[int, tuple[float | None, str]], kind: str) -> None:
        """Record one refresh's results (``refresh_etas``'s return value) made at epoch ``made_at``."""
        self.refreshes[kind] += 1
        t = made_at - self.epoch
        for pk, (start, confidence) in etas.items():
            eta = None if start is None else start - self.epoch
            self.estimates.setdefault(pk, []).append((t, eta, kind, confidence))

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Record what the cycle's own ``refresh_etas`` calls (its rounds) return."""
        original: Callable[..., dict[int, tuple[float | None, str]]] = scheduling.refresh_etas

        def recorded(view: Any, policy: object, jobs: dict[str, Job]) -> dict[int, tuple[float | None, str]]:
            etas = original(view, policy, jobs)
            self.add(view.now, etas, ROUND)
            self._tried.update(int(r.job_id) for r in view.queue if r.job_id.isdigit())
            return etas

        scheduling.refresh_etas = recorded  # type: ignore[assignment]
        try:
            yield
        finally:
            scheduling.refresh_etas = original  # type: ignore[assignment]

    def after_cycle(self, now: float, backend: ClusterBackend) -> None:
        """Estimate the queue if it holds a job that has none yet (at epoch ``now``)."""
        queued = set(Job.objects.filter(status=JobStatus.QUEUED.value).values_list("pk", flat=True))
        if not queued - self._tried:
            return
        cycle = scheduling.build_view(backend, now=now, rounds=False)
        # Preemptors held for their victims are out of the policy's queue (and of the estimate):
        # tried all the same, or every later cycle would estimate again for them.
        self._tried |= queued
        if not cycle.view.queue:
            return
        etas = queue_eta.refresh_etas(cycle.view, active_policy(), cycle.queued)
        self.add(now, etas, ENTRY)


def _confidence_at_points(made: list[tuple[float, str]], submit: float, start: float) -> list[str]:
    """The confidence of the estimate shown at each tenth of the wait (``shown_at``'s choice)."""
    wait = start - submit
    numbered = [(t, float(i)) for i, (t, _) in enumerate(made)]
    out = []
    for k in range(TENTHS):
        i = shown_at(numbered, submit + k * wait / TENTHS)
        out.append(made[int(i or 0)][1])
    return out


def _summary(errors: list[float], unknown: int, jobs: int) -> dict[str, Any]:
    """The fields of ``docs/results/eta_*.json``'s estimators (``scheduler.bench.team_reports``)."""
    array = np.asarray(errors)
    median = percentile(errors, 50)
    p90 = percentile(errors, 90)
    return {
        "jobs": jobs,
        "points": len(errors),
        "unknown_points": unknown,
        "median_rel_error": None if median is None else round(float(median), 4),
        "p90_rel_error": None if p90 is None else round(float(p90), 4),
        "within_25pct": round(float((array <= 0.25).mean()), 4) if len(array) else None,
    }


def score(
    log: EtaLog,
    job_ids: list[int],
    submit: np.ndarray,
    first_start: np.ndarray,
    *,
    min_wait_s: float = MIN_WAIT_S,
    kinds: tuple[str, ...] = (ENTRY, ROUND),
) -> dict[str, Any]:
    """``eta_errors`` over the estimates of ``kinds`` (jobs in trace order: pk, submit, first start)."""
    submits: dict[str, float] = {}
    starts: dict[str, float] = {}
    made: dict[str, list[tuple[float, float | None]]] = {}
    confidences: dict[str, int] = {}
    for pk, sub, start in zip(job_ids, submit, first_start, strict=True):
        if math.isnan(start):
            continue  # never started: no wait to score against
        chosen = [e for e in log.estimates.get(pk, []) if e[2] in kinds]
        if not chosen:
            continue
        key = str(pk)
        submits[key], starts[key], made[key] = float(sub), float(start), [(e[0], e[1]) for e in chosen]
        if start - sub >= min_wait_s:  # a scored job (eta_errors' rule)
            for c in _confidence_at_points([(e[0], e[3]) for e in chosen], float(sub), float(start)):
                confidences[c] = confidences.get(c, 0) + 1
    found = eta_errors(made, submits, starts, min_wait_s=min_wait_s)
    # ``low``: the estimate rests on a guessed time (everyone's run times, or a job that outlived its
    # pools run as long again); never the trace's duration, which jobs.queue_eta does not read.
    return {**_summary(found.errors, found.unknown, found.jobs), "points_by_confidence": confidences}

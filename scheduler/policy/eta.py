"""Estimated start times of waiting jobs: ``plan_cycle`` run forward over expected remaining times.

``estimate_starts(view, policy, remaining, durations)`` replays the same policy on a copy of the view:

1. plan a cycle at time ``t`` (``view.now`` first); every waiting job it places starts at ``t`` and
   then runs for its expected duration; a job it evicts goes back to the queue with what it had left;
2. advance ``t`` to the next expected end of a running job, free that job's GPUs (and its team's
   quota), and plan again;
3. stop when the queue is empty, when nothing left running has a known end (the rest cannot be
   dated: ``None``), or after ``max_steps`` cycles.

Rounds (the policy's periodic rules) are not replayed: they depend on measured rates and on when a
round falls, which the estimate cannot know. ``confidence`` says how much of what a start depends on
was known: ``high`` when every job that ended before it had a declared limit (``max_runtime``),
``medium`` when some came from history, ``low`` when some were guessed; the caller passes the source
of each expected time in ``sources``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace

from scheduler.model import reserve, unreserve
from scheduler.policy.cohort import request_milli
from scheduler.policy.plan import plan_cycle
from scheduler.policy.view import PolicyView, RunningJob

RANK = {"limit": 2, "history": 1, "guess": 0}
CONFIDENCE = {2: "high", 1: "medium", 0: "low"}


@dataclass(frozen=True)
class Estimate:
    """When a waiting job is expected to start (``start_at``, the view's clock; None: unknown)."""

    start_at: float | None
    confidence: str


def estimate_starts(
    view: PolicyView,
    policy: object,
    *,
    remaining: Mapping[str, float | None],
    durations: Mapping[str, float | None],
    sources: Mapping[str, str] | None = None,
    max_steps: int = 500,
) -> dict[str, Estimate]:
    """Estimated start of every job of ``view.queue``. ``remaining``: expected seconds left of each
    running job (None: unknown, it never ends in the estimate); ``durations``: expected run time of
    each waiting job; ``sources``: where each expected time came from (``limit`` | ``history`` |
    ``guess``; default ``limit``)."""
    src = sources or {}
    snap = view.snapshot.copy()
    nodes = {n.name: n for n in snap.nodes}
    quotas = dict(view.quotas) if view.quotas is not None else None
    t = view.now
    ends: dict[str, float | None] = {
        r.job_id: (None if remaining.get(r.job_id) is None else t + float(remaining[r.job_id] or 0.0))
        for r in view.running
    }
    running: dict[str, RunningJob] = {r.job_id: r for r in view.running}
    left: dict[str, float | None] = {r.job_id: durations.get(r.job_id) for r in view.queue}
    queue = list(view.queue)
    out: dict[str, Estimate] = {}
    worst = 2  # least-known source among the jobs that ended so far

    def finish(job_id: str) -> None:
        job = running.pop(job_id)
        for p in job.placements:
            unreserve(nodes[p.node], p)
        snap.running = [p for p in snap.running if p.job_id != job_id]
        ends.pop(job_id, None)
        if quotas is not None and job.request.team in quotas:
            q = quotas[job.request.team]
            quotas[job.request.team] = replace(
                q,
                used_milli=max(0, q.used_milli - request_milli(job.request)),
                used_jobs=max(0, q.used_jobs - 1),
            )

    for _ in range(max_steps):
        if not queue:
            break
        step = PolicyView(
            snapshot=snap, queue=queue, running=list(running.values()), now=t, rounds=False,
            history=view.history, memo=view.memo, quotas=quotas,
        )  # fmt: skip
        decision = plan_cycle(step, policy)
        for eviction in decision.evictions:
            victim = running[eviction.job_id]
            end = ends.get(eviction.job_id)
            finish(eviction.job_id)
            left[eviction.job_id] = None if end is None else max(0.0, end - t)
            queue.append(replace(victim.request, submitted_at=t))
        placed = {p.job_id for p in decision.placements}
        for request in [r for r in queue if r.job_id in placed]:
            mine = decision.placements_for(request.job_id)
            for p in mine:
                reserve(nodes[p.node], p)
                snap.running.append(p)
            running[request.job_id] = RunningJob(request=request, placements=list(mine), started_at=t)
            duration = left.get(request.job_id)
            ends[request.job_id] = None if duration is None else t + duration
            if request.job_id not in out:
                out[request.job_id] = Estimate(start_at=t, confidence=CONFIDENCE[worst])
            if quotas is not None and request.team in quotas:
                q = quotas[request.team]
                quotas[request.team] = replace(
                    q, used_milli=q.used_milli + request_milli(request), used_jobs=q.used_jobs + 1
                )
        queue = [r for r in queue if r.job_id not in placed]
        known = [(end, job_id) for job_id, end in ends.items() if end is not None]
        if not queue or not known:
            break
        t = min(known)[0]
        for end, job_id in sorted(known):
            if end <= t:
                worst = min(worst, RANK.get(src.get(job_id, "limit"), 0))
                finish(job_id)
    for request in view.queue:
        out.setdefault(request.job_id, Estimate(start_at=None, confidence="low"))
    return out


class RuntimeHistory:
    """Run times of completed jobs, for expected run and remaining times where no limit is declared.

    Pools, most specific first: the user's jobs of the same image and shape, the team's jobs of that
    image and shape (both only when the caller names a ``user`` and a ``shape``: the platform does,
    a trace has neither), the team's jobs of the same GPU count, the team's jobs, every job (the
    last is a ``guess``; the others are ``history``). Each keeps the latest ``window`` run times.

    ``remaining(team, gpus, elapsed)``: with ``conditional`` (the default), the median of what the
    pool's runs that outlived ``elapsed`` ran beyond it, ``median(d - elapsed | d > elapsed)``: run
    times are heavy-tailed, so a job that has already run long is expected to run longer than the
    unconditional median says. A pool none of whose runs outlived ``elapsed`` gives way to the next
    one; a job that outlived every run of its pools is expected to run as long again (``elapsed``, a
    ``guess``). Without ``conditional``: ``max(0, median(d) - elapsed)`` of the first non-empty pool.
    """

    def __init__(self, window: int = 50, *, conditional: bool = True) -> None:
        self.window = window
        self.conditional = conditional
        self.pools: dict[Hashable, list[float]] = {}

    @staticmethod
    def _keys(team: str, gpus: int, user: Hashable, shape: Hashable) -> list[tuple[Hashable, str]]:
        keys: list[tuple[Hashable, str]] = []
        if shape is not None:
            if user is not None:
                keys.append((("user", user, shape), "history"))
            keys.append((("team", team, shape), "history"))
        return [*keys, ((team, gpus), "history"), ((team, None), "history"), (None, "guess")]

    def add(
        self, team: str, gpus: int, seconds: float, *, user: Hashable = None, shape: Hashable = None
    ) -> None:
        """Record a completed run (``user``/``shape``: see the class docstring)."""
        for key, _ in self._keys(team, gpus, user, shape):
            pool = self.pools.setdefault(key, [])
            pool.append(seconds)
            del pool[: max(0, len(pool) - self.window)]

    def remaining(
        self,
        team: str,
        gpus: int,
        elapsed: float = 0.0,
        *,
        user: Hashable = None,
        shape: Hashable = None,
    ) -> tuple[float | None, str]:
        """(expected seconds left, source) of a job of ``team`` on ``gpus`` that ran ``elapsed``."""
        for key, source in self._keys(team, gpus, user, shape):
            pool = self.pools.get(key)
            if not pool:
                continue
            if not self.conditional:
                return max(0.0, _median(pool) - elapsed), source
            beyond = [d - elapsed for d in pool if d > elapsed]
            if beyond:
                return _median(beyond), source
        return (elapsed, "guess") if elapsed > 0 and self.pools else (None, "guess")


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0

"""Estimated start times of waiting jobs: ``plan_cycle`` run forward over expected remaining times.

``estimate_starts(view, policy, remaining, durations)`` replays the same policy on a copy of the view:

1. plan a cycle at time ``t`` (``view.now`` first); every waiting job it places starts at ``t`` and
   then runs for its expected duration; a job it evicts goes back to the queue with what it had left;
2. advance ``t`` to the next expected end of a running job, free that job's GPUs (and its team's
   quota), and plan again;
3. stop when the queue is empty, when nothing left running has a known end (the rest cannot be
   dated: ``None``), or after ``max_steps`` cycles.

Rounds (the policy's periodic rules: LAS preemption, unpacking, drains): with ``round_s``, the next
``rounds`` rounds are replayed (the first is the view's own if ``view.rounds``, else the next
multiple of ``round_s``), each as a step of its own; rounds after the first add one step each to
``max_steps``. A job evicted in the estimate goes back to the queue with the service it attained, so
that later rounds see its LAS level. Under a preemptive policy such as ``ours`` a new job of
little attained service is started by the next round's preemption rather than by the next end, and
an estimate without it waits for ends hours or days away. Replaying every round costs a
``plan_cycle`` per ``round_s`` of the horizon. Without
``round_s`` no round is replayed. ``confidence`` says how much of what a start depends on
was known: ``high`` when every job that ended before it had a declared limit (``max_runtime``),
``medium`` when some came from history, ``low`` when some were guessed; the caller passes the source
of each expected time in ``sources``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace

from scheduler.model import reserve, unreserve
from scheduler.policy.cohort import request_milli
from scheduler.policy.plan import plan_cycle
from scheduler.policy.view import PolicyView, RunningJob

RANK = {"limit": 2, "history": 1, "guess": 0}
CONFIDENCE = {2: "high", 1: "medium", 0: "low"}
# Runs that must have outlived a job's elapsed time in a pool before the pool's conditional median is
# used (RuntimeHistory's thin-pool guard; why 5: its docstring).
MIN_RUNS = 5
# Quantiles of the Pareto tail a job that outlived every run of its pools is given (RuntimeHistory.remainders).
TAIL_POINTS = 20
# Ratio of the geometric grid order_statistic_ends dates ends on (its docstring): within 5 % of an
# end's time left, against the 25 % goal.
END_GRID = 0.1


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
    round_s: float | None = None,
    rounds: int = 1,
) -> dict[str, Estimate]:
    """Estimated start of every job of ``view.queue``. ``remaining``: expected seconds left of each
    running job (None: unknown, it never ends in the estimate); ``durations``: expected run time of
    each waiting job; ``sources``: where each expected time came from (``limit`` | ``history`` |
    ``guess``; default ``limit``); ``round_s``: the policy's round interval, to replay the next
    ``rounds`` rounds (module docstring; None: no round)."""
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

    # The first round replayed: this one if the view is a round (the platform's refresh), else the
    # next multiple of ``round_s``; then every ``round_s`` until ``rounds`` have been replayed.
    next_round = math.inf
    rounds_left = rounds if round_s is not None else 0
    if rounds_left > 0 and round_s is not None:
        next_round = t if view.rounds else (t // round_s + 1) * round_s
    # Each replayed round after the first is one step more, so that later rounds do not take the
    # ends' steps (with one round the bound is ``max_steps``, as before ``rounds``).
    for _ in range(max_steps + max(0, rounds_left - 1)):
        if not queue:
            break
        is_round = t >= next_round - 1e-9
        if is_round:
            rounds_left -= 1
            next_round = next_round + round_s if rounds_left > 0 and round_s is not None else math.inf
        step = PolicyView(
            snapshot=snap, queue=queue, running=list(running.values()), now=t, rounds=is_round,
            history=view.history, memo=view.memo, quotas=quotas,
        )  # fmt: skip
        decision = plan_cycle(step, policy)
        for eviction in decision.evictions:
            victim = running[eviction.job_id]
            end = ends.get(eviction.job_id)
            finish(eviction.job_id)
            left[eviction.job_id] = None if end is None else max(0.0, end - t)
            # Back in the queue with the service it attained (later rounds' LAS levels read it).
            queue.append(replace(victim.request, submitted_at=t, attained_gpu_s=victim.attained_at(t)))
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
        if not queue or not (known or next_round < math.inf):
            break
        t = min([e for e, _ in known] + [next_round])
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
    unconditional median says.

    Thin pools: the first pool, most specific first, in which at least ``min_runs`` runs outlived
    ``elapsed`` gives the estimate. A median of fewer runs is one or two runs' remainder (the
    population median lies between the smallest and the largest of n samples with probability
    1 - 2^(1-n): 0.94 for 5, 0.75 for 3). If no pool has that many, the pool with the most runs that
    outlived ``elapsed`` (most specific first on ties) gives it; a job that outlived every run of its
    pools is expected to run as long again (``elapsed``, a ``guess``: the median remaining life of a
    Pareto tail of index 1). Without ``conditional``: ``max(0, median(d) - elapsed)`` of the first
    non-empty pool, with no guard (the baseline the benchmark compares against).
    """

    def __init__(self, window: int = 50, *, conditional: bool = True, min_runs: int = MIN_RUNS) -> None:
        self.window = window
        self.conditional = conditional
        self.min_runs = max(1, min_runs)
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
        """(expected seconds left of a job of ``team`` on ``gpus`` that ran ``elapsed``, source)."""
        if not self.conditional:
            for key, source in self._keys(team, gpus, user, shape):
                pool = self.pools.get(key)
                if pool:
                    return max(0.0, _median(pool) - elapsed), source
            return None, "guess"
        found, source = self.remainders(team, gpus, elapsed, user=user, shape=shape)
        return (None if found is None else _median(found)), source

    def remainders(
        self,
        team: str,
        gpus: int,
        elapsed: float = 0.0,
        *,
        user: Hashable = None,
        shape: Hashable = None,
    ) -> tuple[list[float] | None, str]:
        """(the equally likely times left that the conditional median is taken of, sorted; source):
        the remainders ``d - elapsed`` of the chosen pool's runs that outlived ``elapsed`` (the
        thin-pool guard of the class docstring), or, for a job that outlived every run, the
        quantiles of the Pareto tail of index 1, ``elapsed q / (1 - q)`` for q = 1/20 ... 19/20
        (median: ``elapsed``); None when nothing is known."""
        best: tuple[list[float], str] | None = None  # the most survivors so far (thin pools)
        for key, source in self._keys(team, gpus, user, shape):
            pool = self.pools.get(key)
            if not pool:
                continue
            beyond = [d - elapsed for d in pool if d > elapsed]
            if len(beyond) >= self.min_runs:
                return sorted(beyond), source
            if beyond and (best is None or len(beyond) > len(best[0])):
                best = (beyond, source)
        if best is not None:
            return sorted(best[0]), best[1]
        if elapsed > 0 and self.pools:
            return [elapsed * i / (TAIL_POINTS - i) for i in range(1, TAIL_POINTS)], "guess"
        return None, "guess"


def order_statistic_ends(
    remainders: Mapping[str, Sequence[float] | None],
    *,
    resolution: float = 0.0,
    exact: Collection[str] = (),
) -> dict[str, float | None]:
    """Expected times left of running jobs, dated together so that the k-th end falls at the median
    of the k-th of their ends, not at the k-th smallest of their own medians.

    ``remainders``: each job's equally likely times left (``RuntimeHistory.remainders``; one value
    for a declared limit; None: unknown, it never ends). Why: a waiting job usually starts at the
    first of several ends, and the first of n ends comes much earlier than the earliest of the n
    medians (for n alike jobs, at the 1 - 2^(-1/n) quantile: 0.16 for 4 jobs, 0.056 for 12), so
    per-job medians date starts late. The expected number of ends by ``t``, ``N(t) = sum of each
    job's P(ended by t)``, is the mean of a sum of independent Bernoullis, whose median is within one
    of it; the k-th end is dated at the first ``t`` with ``N(t) >= k - 1/2`` (for one job: its
    median, the conditional estimator's answer), and given to the job not yet dated that is most
    likely to have ended by then (the earlier-listed one on a tie).

    ``resolution``: the dated times left are rounded to a geometric grid of that ratio (``END_GRID``
    for the callers). Per-job medians often coincide (jobs started in the same cycle share a pool
    and an elapsed time), while dated order statistics are all apart; ``estimate_starts`` plans one
    cycle per distinct end, so on Philly's 256 GPUs its 100-step bound was spent on ends seconds
    apart and 42 % of the benchmark's points had no estimate. A grid of ratio 1.1 moves an end by
    at most 5 % of its time left. ``exact``: jobs whose dated end stays off the grid (the platform's
    declared limits)."""
    out: dict[str, float | None] = {}
    dists: list[tuple[str, Sequence[float]]] = []
    for job_id, found in remainders.items():
        if found:
            dists.append((job_id, sorted(found)))
        else:
            out[job_id] = None
    events = sorted((r, i) for i, (_, d) in enumerate(dists) for r in d)
    counts = [0] * len(dists)
    dated = [False] * len(dists)
    expected = 0.0
    k = 1
    for r, i in events:
        counts[i] += 1
        expected += 1.0 / len(dists[i][1])
        while k <= len(dists) and expected >= k - 0.5 - 1e-12:
            chosen = max(
                (j for j in range(len(dists)) if not dated[j]),
                key=lambda j: (counts[j] / len(dists[j][1]), -j),
            )
            dated[chosen] = True
            job_id = dists[chosen][0]
            out[job_id] = r if job_id in exact else _on_grid(r, resolution)
            k += 1
    return out


def _on_grid(seconds: float, resolution: float) -> float:
    """``seconds`` rounded to the nearest point of the geometric grid ``(1 + resolution)^k`` (0 or
    under a second: unchanged)."""
    if resolution <= 0 or seconds <= 1.0:
        return seconds
    return (1.0 + resolution) ** round(math.log(seconds) / math.log1p(resolution))


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0

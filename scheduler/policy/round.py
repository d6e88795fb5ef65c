"""One round of the periodic rules, shared by the platform's ``plan_cycle`` and the simulator:
``run_round(policy, state, now) -> RoundOutcome``.

The round owns every rule; the caller owns only the state and what an eviction or a migration does
to it. In order:

1. **unpack** (introspective policies, ``scheduler.policy.unpacking.unpack_victim``): each shared GPU
   (in the state's GPU order) whose tenants' measured rates say packing loses loses its newest
   tenant, rule ``unpack``; the moved job learns to avoid its former co-tenants (``Evicted.avoid``);
2. **preempt** (``scheduler.policy.preemption.choose_victims``): rules ``priority`` (any policy) and
   ``las`` (preemptive policies) over the first ``window`` waiting jobs;
3. **unpack on idle** (``Policy.unpack_on_idle``): rule ``unpack-idle``;
4. **drain** (``Policy.defragment``, ``scheduler.policy.drain``): at most one per round, rule
   ``drain``.

Each step sees the state as the previous steps left it: the caller applies an eviction when
``RoundState.evict`` is called (the simulator requeues the victim at once, so it waits again in the
same round; the platform's victim stops first and is not waiting in this cycle).

The rules, stated once:

- *evictable* (``preemption.may_evict``): preemptible, and the current run at least its minimum run
  time old;
- *the victim order*: lowest priority class first, then the highest LAS level, then the most
  recently started, then the latest in submit order (``Running.order``, larger = later);
- *outranks*: a waiting job outranks a running one of a lower priority class (rule ``priority``),
  and, under a preemptive policy, one of the same class in a higher LAS level (rule ``las``);
- *the newest tenant* (unpacking): the latest started, then the latest in submit order;
- *a waiting job's need*: its whole GPUs, or one GPU for a shared job (a GPU of its own: a job that
  waits after a cycle had no co-location admitted);
- *a drain unit*: a whole-GPU job of one task on the node, or a shared GPU all of whose tenants are
  shared jobs, each only if every job of it is evictable.

Speed: the simulator calls this every ``round_s`` over a cluster of hundreds of jobs, so the victim
order and the levels are computed on arrays (``Candidates``), and the records of single jobs
(``Running``, ``Waiting``) are only asked for the jobs a step looks at (the preemption walk reads
the queue lazily: with no idle GPU it often stops at the first waiting job).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import numpy as np

from scheduler.model import JobRequest
from scheduler.policy.drain import drain_plan, first_blocked
from scheduler.policy.preemption import EPS, choose_victims, may_evict
from scheduler.policy.queue_sort import las_level
from scheduler.policy.registry import Policy
from scheduler.policy.unpacking import spare_gpus, unpack_on_idle, unpack_victim

# Waiting jobs the preemption and drain rules look at (the simulator's ``SimConfig.window``).
WINDOW = 64

J = TypeVar("J", bound=Hashable)  # a running job's handle in the caller's state
G = TypeVar("G")  # a GPU's handle in the caller's state


class Running(NamedTuple, Generic[J]):
    """What the rules need of one running job."""

    job: J
    name: str  # its job id, for reasons
    priority: int
    started_at: float
    order: int  # submit order (ties of ``started_at``: the larger is the newer)
    preemptible: bool
    min_runtime_s: float
    shared: bool  # holds a share of a GPU (not whole GPUs)
    gpus: int  # GPUs as attained service counts them (``queue_sort.job_gpus``)
    tasks: int
    rate: float | None  # measured progress rate of the current run (1.0 = as fast as alone)
    tolerance: float  # its slowdown tolerance


class Waiting(NamedTuple, Generic[J]):
    """A waiting job: its handle, its request (as the policy offers it) and its attained service."""

    job: Any
    request: JobRequest
    attained_gpu_s: float


@dataclass
class Candidates(Generic[J]):
    """The running jobs, as arrays (one entry per job): the preemption step's input."""

    jobs: Sequence[J]
    attained_gpu_s: np.ndarray  # including the current run, at ``now``
    priority: np.ndarray
    started_at: np.ndarray
    order: np.ndarray
    preemptible: np.ndarray
    min_runtime_s: np.ndarray


class RoundState(Protocol[J, G]):
    """The caller's cluster state, as the rules read it, and the two ways the round changes it."""

    def idle_gpus(self) -> int:
        """GPUs with nothing on them (on schedulable nodes)."""
        ...

    def idle_per_node(self) -> np.ndarray:
        """Idle GPUs per node (node order of ``node_gpus``)."""
        ...

    def node_gpus(self) -> np.ndarray:
        """GPUs per node (0 for a node that takes no work)."""
        ...

    def waiting(self) -> Iterator[Waiting[J]]:
        """Waiting jobs in queue order (a fresh iterator each call, over the state as it is now)."""
        ...

    def candidates(self, now: float) -> Candidates[J]:
        """Every running job."""
        ...

    def running(self, job: J) -> Running[J]: ...

    def shared_gpus(self) -> list[tuple[G, Sequence[J]]]:
        """GPUs with two or more tenants, in GPU order, with their tenants in start order."""
        ...

    def gpu_label(self, gpu: G) -> str:
        """A GPU in words, for a reason (``GPU 0 of n1``)."""
        ...

    def holders(self, job: J) -> list[Sequence[J]]:
        """For each GPU ``job`` holds (each once): every job on that GPU."""
        ...

    def jobs_on_node(self, node: int) -> Iterable[J]:
        """The running jobs with a task on node ``node`` (each once)."""
        ...

    def node_tenants(self, node: int) -> list[Sequence[J]]:
        """Per GPU of node ``node``: the jobs on it."""
        ...

    def evict(self, job: J, rule: str, preemptor: Any, reason: str, avoid: Sequence[J]) -> None:
        """Free ``job``'s GPUs now (all of its tasks); ``avoid``: co-tenants it should not meet again."""
        ...

    def migrate(self, target: Any, jobs: Sequence[J], reason: str) -> None:
        """Move ``jobs`` so that the waiting job ``target`` gets the drained nodes."""
        ...


@dataclass
class Evicted:
    job: Any
    rule: str
    preemptor: Any
    reason: str


@dataclass
class RoundOutcome:
    """What the round did, in order (the state has already applied it)."""

    evictions: list[Evicted] = field(default_factory=list)
    drain_target: Any = None
    migrated: list[Any] = field(default_factory=list)

    @property
    def acted(self) -> bool:
        """Whether anything was evicted or moved (capacity may have been freed)."""
        return bool(self.evictions or self.migrated)


def has_rounds(policy: Policy) -> bool:
    """Whether the policy has periodic rules beyond the priority rule (which only acts between
    priority classes)."""
    return policy.preemptive or policy.introspective or policy.unpack_on_idle or policy.defragment


def round_may_act(
    policy: Policy, *, waiting: bool, running: bool, shared_gpus: bool, priority_classes: bool = False
) -> bool:
    """Whether a round now could evict or move anything (so a clock can skip rounds that cannot):
    preemption and drains need waiting and running jobs; unpacking needs a shared GPU, queue or not.
    ``priority_classes``: whether jobs of different priority classes may be present."""
    if waiting and running and (policy.preemptive or policy.defragment or priority_classes):
        return True
    return (policy.introspective or policy.unpack_on_idle) and shared_gpus


def waiting_need(request: JobRequest) -> float:
    """Idle GPUs a waiting job needs: its whole GPUs, or one for a shared job (a GPU of its own)."""
    whole = sum(t.gpus for t in request.tasks)
    return float(whole) if whole else float(sum(1 for t in request.tasks if t.gpu_milli))


def whole_sizes(request: JobRequest) -> tuple[int, ...]:
    """Whole-GPU task sizes, largest first."""
    return tuple(sorted((t.gpus for t in request.tasks if t.gpus), reverse=True))


def victim_order(c: Candidates[Any], levels: np.ndarray) -> np.ndarray:
    """Indices of ``c`` in victim order: lowest priority class first, then the highest level, then
    the most recently started, then the latest in submit order."""
    return np.lexsort((-c.order, -c.started_at, -levels, c.priority))


def outranks(policy: Policy, waiting_priority: int, waiting_level: int, priority: int, level: int) -> bool:
    """Whether a waiting job may evict a running one (levels only matter under a preemptive policy)."""
    if waiting_priority != priority:
        return waiting_priority > priority
    return policy.preemptive and level > waiting_level


def newest_tenant(tenants: Sequence[Running[Any]]) -> Running[Any]:
    """The most recently started tenant (ties: the latest in submit order)."""
    return max(tenants, key=lambda r: (r.started_at, r.order))


def evictable(r: Running[Any], now: float) -> bool:
    return may_evict(r.preemptible, r.started_at, r.min_runtime_s, now)


def run_round(policy: Policy, state: RoundState[Any, Any], now: float, window: int = WINDOW) -> RoundOutcome:
    """The periodic rules of ``policy`` over ``state`` at ``now``, in order; see the module docstring."""
    out = RoundOutcome()
    if policy.introspective:
        _unpack(policy, state, now, out)
    _preempt(policy, state, now, window, out)
    if policy.unpack_on_idle:
        _unpack_idle(state, now, out)
    if policy.defragment:
        _drain(state, now, window, out)
    return out


def _evict(
    state: RoundState[Any, Any],
    out: RoundOutcome,
    job: Any,
    rule: str,
    by: Any,
    why: str,
    avoid: Sequence[Any] = (),
) -> None:
    state.evict(job, rule, by, why, avoid)
    out.evictions.append(Evicted(job, rule, by, why))


def _unpack(policy: Policy, state: RoundState[Any, Any], now: float, out: RoundOutcome) -> None:
    """Shared GPUs whose measured rates say packing loses lose their newest tenant (rule ``unpack``)."""
    for gpu, ids in state.shared_gpus():
        tenants = [state.running(j) for j in ids]
        if any(not t.shared or t.rate is None for t in tenants):
            continue
        rates = [float(t.rate or 0.0) for t in tenants]
        victim = unpack_victim(
            tenants,
            rates,
            [(t.started_at, t.order) for t in tenants],  # type: ignore[misc]
            policy.unpack_rule,
            [t.tolerance for t in tenants],
        )
        if victim is None or not evictable(victim, now):
            continue
        shown = ", ".join(f"{t.name} at {r:.2f}" for t, r in zip(tenants, rates, strict=True))
        why = f"unpack: {state.gpu_label(gpu)} measured {shown} (rule {policy.unpack_rule})"
        others = [t.job for t in tenants if t.job != victim.job]
        _evict(state, out, victim.job, "unpack", victim.job, why, others)


def _preempt(policy: Policy, state: RoundState[Any, Any], now: float, window: int, out: RoundOutcome) -> None:
    """Priority and LAS-level preemption over the first ``window`` waiting jobs."""
    queue = itertools.islice(state.waiting(), window)
    first = next(queue, None)
    if first is None:
        return
    c = state.candidates(now)
    if not len(c.jobs):
        return
    thresholds = policy.las_thresholds
    levels = np.searchsorted(np.asarray(thresholds, dtype=float), c.attained_gpu_s, side="right")
    ok = np.flatnonzero(c.preemptible.astype(bool) & (now - c.started_at >= c.min_runtime_s - EPS))
    if not ok.size:
        return
    sub: Candidates[Any] = Candidates(
        [],
        c.attained_gpu_s[ok],
        c.priority[ok],
        c.started_at[ok],
        c.order[ok],
        c.preemptible[ok],
        c.min_runtime_s[ok],
    )
    # Victims are indices into ``c``, in victim order; only the ones the walk reaches are looked at
    # (the walk stops at the first waiting job whose need is not met, often the first).
    victims = ok[victim_order(sub, levels[ok])].tolist()
    level_of = levels.tolist()
    prio_of = c.priority.tolist()
    jobs = c.jobs
    info: dict[int, tuple[int, int]] = {}

    def rank(w: Waiting[Any]) -> tuple[int, int]:
        got = info.get(id(w))
        if got is None:
            got = info[id(w)] = (int(w.request.priority), las_level(thresholds, w.attained_gpu_s))
        return got

    # A state with team quotas says which victims a waiting job may take (its own team's only).
    allowed = getattr(state, "may_preempt", None)

    def beats(w: Waiting[Any], v: int) -> bool:
        p, lv = rank(w)
        if allowed is not None and not allowed(w.job, jobs[v]):
            return False
        return outranks(policy, p, lv, prio_of[v], level_of[v])

    chosen_jobs: set[Any] = set()

    def frees(v: int, chosen: set[int]) -> float:
        # A GPU becomes idle when all of its tenants are chosen.
        chosen_jobs.add(jobs[v])
        return float(sum(1 for hs in state.holders(jobs[v]) if all(h in chosen_jobs for h in hs)))

    waiting = ((w, waiting_need(w.request)) for w in itertools.chain((first,), queue))
    chosen = choose_victims(waiting, victims, beats, frees, float(state.idle_gpus()))
    for v, w in chosen:
        p, lv = rank(w)
        req = w.request
        if p > prio_of[v]:
            rule = "priority"
            why = f"priority: waiting job {req.job_id} (priority {p}) outranks priority {prio_of[v]}"
        else:
            rule = "las"
            why = (
                f"las: waiting job {req.job_id} at level {lv} outranks level {level_of[v]} "
                f"({float(c.attained_gpu_s[v]) / 3600:.2f} GPU-h attained)"
            )
        _evict(state, out, jobs[v], rule, w.job, why)


def _unpack_idle(state: RoundState[Any, Any], now: float, out: RoundOutcome) -> None:
    """With idle GPUs left over after every waiting job's need, the newest tenant of each shared GPU
    restarts alone (rule ``unpack-idle``), one per spare GPU."""
    spare = spare_gpus(state.idle_gpus(), (waiting_need(w.request) for w in state.waiting()))
    if not spare:
        return
    shared: list[tuple[list[Any], list[tuple[float, int]]]] = []
    for _gpu, ids in state.shared_gpus():
        tenants = [state.running(j) for j in ids]
        if len(tenants) < 2 or not all(t.shared for t in tenants):
            continue
        # Only a tenant that may be moved is a candidate.
        if evictable(newest_tenant(tenants), now):
            shared.append(([t.job for t in tenants], [(t.started_at, t.order) for t in tenants]))
    for job in unpack_on_idle(shared, spare):  # type: ignore[arg-type]
        _evict(
            state, out, job, "unpack-idle", job, "unpack-idle: idle GPUs are left over, so it restarts alone"
        )


def _drain(state: RoundState[Any, Any], now: float, window: int, out: RoundOutcome) -> None:
    """Drain nodes for the first blocked whole-GPU job of the window (at most one drain)."""
    idle_node = state.idle_per_node()
    node_gpus = state.node_gpus()
    fits: dict[tuple[int, ...], bool] = {}

    def blocked(request: JobRequest) -> bool:
        sizes = whole_sizes(request)
        if not sizes or any(t.gpu_milli and not t.gpus for t in request.tasks):
            return False
        ok = fits.get(sizes)
        if ok is None:
            # The i-th largest task needs its own node with that many idle GPUs.
            ok = fits[sizes] = all(int((idle_node >= g).sum()) > i for i, g in enumerate(sizes))
        return not ok

    info: dict[Any, Running[Any]] = {}

    def running(j: Any) -> Running[Any]:
        r = info.get(j)
        if r is None:
            r = info[j] = state.running(j)
        return r

    def units_of(ni: int) -> list[tuple[int, list[Any]]]:
        units: list[tuple[int, list[Any]]] = []
        for j in state.jobs_on_node(ni):
            r = running(j)
            if r.tasks == 1 and not r.shared and evictable(r, now):
                units.append((r.gpus, [j]))
        for tenants in state.node_tenants(ni):
            if tenants and all(running(t).shared and evictable(running(t), now) for t in tenants):
                units.append((1, sorted(tenants)))
        return units

    queue = (
        (w, waiting_need(w.request), blocked(w.request)) for w in itertools.islice(state.waiting(), window)
    )
    budget = float(idle_node.sum())
    gpus_of: Callable[[Any], int] = lambda j: running(j).gpus  # noqa: E731
    while True:
        found = first_blocked(queue, budget)
        if found is None:
            return
        target, budget = found
        plan = drain_plan(whole_sizes(target.request), idle_node, node_gpus, units_of, gpus_of)
        if plan is not None:
            break
    reason = f"drain: moved so that waiting job {target.request.job_id} fits on whole nodes"
    state.migrate(target.job, plan, reason)
    out.drain_target = target.job
    out.migrated = list(plan)


__all__ = [
    "WINDOW",
    "Candidates",
    "Evicted",
    "RoundOutcome",
    "RoundState",
    "Running",
    "Waiting",
    "has_rounds",
    "outranks",
    "round_may_act",
    "run_round",
    "victim_order",
    "waiting_need",
    "whole_sizes",
]

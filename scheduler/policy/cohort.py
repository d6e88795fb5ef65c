"""Team quotas in one cohort (the whole cluster): admission limits, borrowing and reclaim.

Kueue's model, on the platform's units (milli-GPU, 1000 = one GPU):

- **Limits** (``admission_problem``): a job is admitted only while its team stays within its
  maximum (``max_milli``), its user within the per-user cap, the team within its maximum number of
  concurrent jobs, and while the team's monthly GPU-hour budget is not used up. A job over a limit
  *waits* with the reason ("waiting for quota: team X uses 8 of 8 GPUs", "budget of N GPU-h used");
  it is never refused for it (only a request that can never run is refused, at submit).
- **Guarantee and borrowing**: a team may hold up to its guarantee whatever others do (*nominal*
  work), and beyond it up to its maximum when GPUs are idle (*borrowed* work). What borrowers may take
  in all is the capacity nobody is guaranteed plus the other teams' unused guarantee (less what is
  held for their preemptors), each team's part capped by its lending limit
  (``lending_limit_milli``; None: all of it). A waiting job beyond its own team's guarantee reserves
  nothing: it borrows like any other, so teams cannot block each other on idle GPUs.
- **Order** (``gate``): nominal jobs first, in the policy's order; then borrowers, one at a time, the
  job of the team with the lowest effective share (``scheduler.policy.fair_share``: held GPUs over
  guarantee weight times the decayed-usage factor), so idle GPUs split by weight and history.
- **Reclaim** (``reclaim``): a nominal job that the idle GPUs cannot hold may evict work of other
  teams that hold more than their guarantee, at most what each holds beyond it: lowest priority
  first, then least attained service (least work lost), then most recently started, node by node: a
  task takes the fewest victims on one node that make it fit there. The jobs marked borrowed are
  taken first; the team's other jobs only when the marked ones cannot make room for the job (a
  marked job may sit on the wrong node, or be admitted and not yet running). Victims are chosen for
  a job only if they make all of its tasks fit (else none are).
- **Marks** (``borrowed_marks``): a team's marks always add up to its current excess (what it holds
  beyond its guarantee), given to its open admissions newest first, as Kueue reads it: the workload
  admitted last is the one borrowing. They are recomputed whenever the team's usage or guarantee
  changes: a job admitted on borrowed GPUs loses its mark once older work ends and the team is back
  within its guarantee, and a lower guarantee marks older admissions too.

Pure: dataclasses in, dataclasses out; the platform fills ``TeamQuota`` from its quota rows, the
policy (``plan_cycle``) calls ``gate`` and ``reclaim``. Every amount is the job's request as asked
(``request_milli``), what the platform's quota ledger reserves.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from scheduler.model import JobRequest
from scheduler.policy.fair_share import effective_share, weights

EPS = 1e-9


@dataclass(frozen=True)
class TeamQuota:
    """One team's limits and what it holds now (admitted jobs), as the policy sees them."""

    team: str
    name: str = ""
    guaranteed_milli: int = 0
    max_milli: int = 10**9
    used_milli: int = 0
    max_jobs: int = 10**9
    used_jobs: int = 0
    per_user_milli: int = 10**9
    # User name -> milli-GPU their admitted jobs in this team hold.
    user_used_milli: Mapping[str, int] = field(default_factory=dict)
    budget_gpu_h: float = math.inf
    budget_used_gpu_h: float = 0.0
    lending_limit_milli: int | None = None
    # Slurm's fair-share factor from decayed usage (1 = no recent use).
    fair_share: float = 1.0
    # Milli-GPU of this team's jobs waiting outside the policy's queue for GPUs already being freed
    # for them (preemptors during their victims' grace): not lendable.
    held_for_milli: int = 0

    @property
    def label(self) -> str:
        return self.name or self.team

    @property
    def borrowed_milli(self) -> int:
        return max(0, self.used_milli - self.guaranteed_milli)


def borrowed_marks(sizes_newest_first: Sequence[int], excess_milli: int) -> list[int]:
    """The borrowed part of each of a team's open admissions (milli-GPU), given their sizes newest
    first and the team's excess (``TeamQuota.borrowed_milli``): each takes what is left of the excess,
    up to its size, so the marks add up to the excess (or to all the team holds, if less)."""
    left = max(0, excess_milli)
    marks = []
    for size in sizes_newest_first:
        mark = min(size, left)
        marks.append(mark)
        left -= mark
    return marks


def request_milli(request: JobRequest) -> int:
    """Milli-GPU a job asks for: whole GPUs x 1000 plus the shares, over all its tasks."""
    return sum(t.gpus * 1000 if t.gpus else t.gpu_milli for t in request.tasks)


def _gpus(milli: float) -> str:
    return f"{milli / 1000:g}"


def admission_problem(quota: TeamQuota, user: str, milli: int) -> str | None:
    """Why a job of ``milli`` by ``user`` must wait under ``quota`` (limits only), or None."""
    if quota.used_jobs + 1 > quota.max_jobs:
        return f"waiting for quota: team {quota.label} runs {quota.used_jobs} of {quota.max_jobs} concurrent jobs"
    if milli and quota.used_milli + milli > quota.max_milli:
        return (
            f"waiting for quota: team {quota.label} uses {_gpus(quota.used_milli)} of "
            f"{_gpus(quota.max_milli)} GPUs"
        )
    held = quota.user_used_milli.get(user, 0)
    if milli and held + milli > quota.per_user_milli:
        return (
            f"waiting for quota: {user} uses {_gpus(held)} of {_gpus(quota.per_user_milli)} GPUs "
            f"(per-user cap of team {quota.label})"
        )
    if milli and quota.budget_used_gpu_h >= quota.budget_gpu_h - EPS:
        return f"waiting for budget: budget of {quota.budget_gpu_h:g} GPU-h used (team {quota.label}, this month)"
    return None


@dataclass
class _Tally:
    """Running totals of one gate: what each team and user holds as jobs are let through."""

    quotas: dict[str, TeamQuota]
    capacity_milli: int
    used: dict[str, int] = field(default_factory=dict)
    jobs: dict[str, int] = field(default_factory=dict)
    users: dict[tuple[str, str], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for t, q in self.quotas.items():
            self.used[t] = q.used_milli
            self.jobs[t] = q.used_jobs
            for user, held in q.user_used_milli.items():
                self.users[(t, user)] = held

    def current(self, team: str) -> TeamQuota:
        held = {u: m for (t, u), m in self.users.items() if t == team}
        return replace(
            self.quotas[team], used_milli=self.used[team], used_jobs=self.jobs[team], user_used_milli=held
        )

    def admit(self, team: str, user: str, milli: int) -> None:
        self.used[team] += milli
        self.jobs[team] += 1
        self.users[(team, user)] = self.users.get((team, user), 0) + milli

    def physically_free(self) -> int:
        """Milli-GPU of the cohort that no team's admitted work holds."""
        return self.capacity_milli - sum(self.used.values())

    def borrow_room(self, team: str) -> int:
        """Milli-GPU beyond guarantees that ``team`` may still borrow now."""
        guaranteed = sum(q.guaranteed_milli for q in self.quotas.values())
        room = max(0, self.capacity_milli - guaranteed)
        for t, q in self.quotas.items():
            if t == team:
                continue
            unused = max(0, q.guaranteed_milli - self.used[t] - q.held_for_milli)
            room += unused if q.lending_limit_milli is None else min(unused, q.lending_limit_milli)
        borrowed = sum(max(0, self.used[t] - q.guaranteed_milli) for t, q in self.quotas.items())
        return room - borrowed


@dataclass
class Gate:
    """What ``gate`` let through: the jobs in the order to place them, the borrowing ones among them,
    and why each other job waits."""

    admitted: list[JobRequest]
    borrowing: set[str]
    waiting: dict[str, str]


def gate(
    queue: Sequence[JobRequest],
    quotas: Mapping[str, TeamQuota],
    *,
    capacity_milli: int,
    sizes: Mapping[str, int] | None = None,
) -> Gate:
    """Apply the cohort's limits to ``queue`` (in the policy's order); see the module docstring.

    ``sizes``: milli-GPU per job id as asked (default: ``request_milli`` of the request; pass the
    originals when the policy reshaped a request, e.g. offered a whole GPU as a share). Jobs of a team
    absent from ``quotas`` pass unchecked (no quota known)."""
    tally = _Tally(dict(quotas), capacity_milli)
    size = {r.job_id: (sizes or {}).get(r.job_id, request_milli(r)) for r in queue}
    admitted: list[JobRequest] = []
    waiting: dict[str, str] = {}
    candidates: list[tuple[int, JobRequest]] = []
    for index, r in enumerate(queue):
        if r.team not in quotas:
            admitted.append(r)
            continue
        problem = admission_problem(tally.current(r.team), r.user, size[r.job_id])
        if problem is not None:
            waiting[r.job_id] = problem
        elif tally.used[r.team] + size[r.job_id] <= quotas[r.team].guaranteed_milli:
            tally.admit(r.team, r.user, size[r.job_id])
            admitted.append(r)
        else:
            candidates.append((index, r))
    # A lender's waiting job beyond its guarantee is a borrower like any other and reserves none of
    # the unused guarantee: reserving it let such teams block each other on an idle cluster. Its jobs
    # within the guarantee were counted above (nominal), and get the guarantee back by reclaim.
    share_weight = weights({t: float(q.guaranteed_milli) for t, q in quotas.items()})
    borrowing: set[str] = set()
    while candidates:

        def key(item: tuple[int, JobRequest]) -> tuple[float, int]:
            index, r = item
            q = quotas[r.team]
            return (
                effective_share(tally.used[r.team] + size[r.job_id], share_weight[r.team], q.fair_share),
                index,
            )

        best = min(candidates, key=key)
        candidates.remove(best)
        _, r = best
        q = tally.current(r.team)
        milli = size[r.job_id]
        problem = admission_problem(q, r.user, milli)
        if problem is None:
            beyond = max(0, q.used_milli + milli - q.guaranteed_milli) - q.borrowed_milli
            if beyond > tally.borrow_room(r.team):
                if beyond > tally.physically_free():
                    # The cluster is full, not protected: placement says so (capacity), and nothing
                    # is counted for a job that cannot be placed.
                    admitted.append(r)
                    borrowing.add(r.job_id)
                    continue
                problem = (
                    f"waiting for quota: team {q.label} uses {_gpus(q.used_milli)} GPUs (guarantee "
                    f"{_gpus(q.guaranteed_milli)}); no idle GPUs may be lent to it now"
                )
        if problem is not None:
            waiting[r.job_id] = problem
            continue
        tally.admit(r.team, r.user, milli)
        admitted.append(r)
        if tally.used[r.team] > q.guaranteed_milli:
            borrowing.add(r.job_id)
    return Gate(admitted=admitted, borrowing=borrowing, waiting=waiting)


@dataclass(frozen=True)
class Candidate:
    """A running job that reclaim may evict (``borrowed``: part of its team's excess now, see
    ``borrowed_marks``; the others of a team beyond its guarantee are taken only when the marked ones
    cannot make room)."""

    job_id: str
    team: str
    milli: int
    priority: int
    attained_gpu_s: float
    started_at: float
    borrowed: bool = True


def reclaim_order(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Victims in the order reclaim takes them: lowest priority, least attained, newest first."""
    return sorted(candidates, key=lambda c: (c.priority, c.attained_gpu_s, -c.started_at, c.job_id))


@dataclass(frozen=True)
class NodeRoom:
    """One node as reclaim sees it: its idle GPUs, the jobs on each of its other GPUs, its GPU model
    (a node that takes no work: no idle GPUs and nothing held)."""

    idle: int
    held: Sequence[Sequence[str]] = ()
    gpu_model: str = ""


def _task_needs(request: JobRequest) -> list[tuple[int, tuple[str, ...]]]:
    """Per task, largest first: the GPUs it needs on one node (a share needs a GPU of its own) and
    the GPU models it accepts."""
    needs = [(t.gpus if t.gpus else 1, t.gpu_models) for t in request.tasks if t.gpus or t.gpu_milli]
    return sorted(needs, key=lambda n: -n[0])


def reclaim(
    waiting: Sequence[JobRequest],
    candidates: Sequence[Candidate],
    quotas: Mapping[str, TeamQuota],
    *,
    nodes: Sequence[NodeRoom],
) -> list[tuple[str, str]]:
    """(victim id, preemptor id) pairs: borrowed work evicted for the nominal jobs of ``waiting`` (in
    placement order) that the idle GPUs cannot hold, node by node: a task that fits on no node's idle
    GPUs takes, on one node, the fewest victims that make it fit there (victims in ``reclaim_order``;
    ties: the plan whose most valuable victim comes earliest in that order). Counting idle GPUs over
    the whole cluster evicted borrowers on nodes where the task still did not fit. A team's job is a
    victim only while that team holds more than its guarantee, never for its own team's job; a job
    gets victims only if all of its tasks then fit (else none). The candidates marked ``borrowed``
    are tried first for the whole job; the others only if those cannot make room."""
    borrowed = {t: q.borrowed_milli for t, q in quotas.items()}
    order = reclaim_order([c for c in candidates if c.team in quotas])
    rank = {c.job_id: i for i, c in enumerate(order)}
    by_id = {c.job_id: c for c in order}
    on_node = [sorted({h for hs in n.held for h in hs if h in rank}, key=rank.__getitem__) for n in nodes]
    chosen: list[tuple[str, str]] = []
    chosen_set: set[str] = set()
    promised = [0] * len(nodes)  # GPUs of each node already counted for earlier jobs' tasks

    def room(n: int, gone: set[str], used: list[int]) -> int:
        freed = sum(1 for hs in nodes[n].held if hs and all(h in gone for h in hs))
        return nodes[n].idle + freed - used[n]

    marked = {c.job_id for c in order if c.borrowed}
    for job in waiting:
        for allowed in (marked, set(rank)):
            gone, used, owed, victims = set(chosen_set), list(promised), dict(borrowed), []
            for need, models in _task_needs(job):
                usable = [n for n in range(len(nodes)) if not models or nodes[n].gpu_model in models]
                fits = [n for n in usable if room(n, gone, used) >= need]
                if fits:
                    best = min(fits, key=lambda n: (room(n, gone, used), n))
                    used[best] += need
                    continue
                plans: list[tuple[tuple[int, tuple[int, ...], int], int, list[str]]] = []
                for n in usable:
                    takeable = [v for v in on_node[n] if v in allowed]
                    plan = _node_plan(
                        need, takeable, by_id, job.team, gone, owed, partial(room, n, used=used)
                    )
                    if plan is not None:
                        key = (len(plan), tuple(sorted((rank[v] for v in plan), reverse=True)), n)
                        plans.append((key, n, plan))
                if not plans:
                    break
                _, n, plan = min(plans)
                for v in plan:
                    gone.add(v)
                    owed[by_id[v].team] = owed.get(by_id[v].team, 0) - by_id[v].milli
                victims += plan
                used[n] += need
            else:
                chosen += [(v, job.job_id) for v in victims]
                chosen_set, promised, borrowed = gone, used, owed
                break
    return chosen


def _node_plan(
    need: int,
    on_node: Sequence[str],
    by_id: Mapping[str, Candidate],
    team: str,
    gone: set[str],
    owed: Mapping[str, int],
    room: Callable[[set[str]], int],
) -> list[str] | None:
    """Victims on ``node`` (in reclaim order, then the ones not needed dropped) that make ``need``
    GPUs idle on that node (``room``: its idle GPUs less what is promised, with a set evicted), or None when all it may take do not."""
    plan: list[str] = []
    trial = set(gone)
    left = dict(owed)
    for v in on_node:
        if room(trial) >= need:
            break
        c = by_id[v]
        if v in trial or c.team == team or left.get(c.team, 0) <= 0:
            continue
        plan.append(v)
        trial.add(v)
        left[c.team] -= c.milli
    if room(trial) < need:
        return None
    for v in reversed(plan[:]):  # drop victims whose GPUs the task does not need after all
        if room(trial - {v}) >= need:
            plan.remove(v)
            trial.discard(v)
    return plan


def reclaim_reason(lender: TeamQuota) -> str:
    return f"reclaimed by team {lender.label} (under its guarantee)"

"""Teams of a trace and their guarantees for the fairness and ETA benchmarks.

- **Team of a job:** the trace's team column (``TraceJob.team``: Philly's virtual cluster, ITP's
  model name); a job without one is charged to ``UNASSIGNED``.
- **Guarantee (whole GPUs):** in proportion to each team's demand, its GPU-seconds
  (``num_gpus * duration``) over the jobs replayed::

      guarantee_t = total_gpus * demand_t / sum_u demand_u

  rounded down, and the GPUs left by rounding handed out one each by largest remainder (ties: team
  name), so the guarantees add up to the cluster. Every team may borrow up to the whole cluster
  (``max_milli``) and lends without a limit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from scheduler.sim.trace import TraceJob

UNASSIGNED = "unassigned"


def team_of(job: TraceJob) -> str:
    return job.team or UNASSIGNED


def demand_gpu_s(jobs: Iterable[TraceJob]) -> dict[str, float]:
    """GPU-seconds each team asks for over ``jobs``."""
    out: dict[str, float] = {}
    for job in jobs:
        team = team_of(job)
        out[team] = out.get(team, 0.0) + job.num_gpus * job.duration
    return out


def guarantees_by_demand(jobs: Iterable[TraceJob], total_gpus: int) -> dict[str, int]:
    """Whole-GPU guarantee per team, in proportion to its demand (module docstring)."""
    demand = demand_gpu_s(jobs)
    total = sum(demand.values())
    if total <= 0:
        return {team: 0 for team in demand}
    exact = {team: total_gpus * d / total for team, d in demand.items()}
    out = {team: math.floor(x) for team, x in exact.items()}
    left = total_gpus - sum(out.values())
    for team in sorted(exact, key=lambda t: (-(exact[t] - out[t]), t))[:left]:
        out[team] += 1
    return out

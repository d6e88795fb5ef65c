"""What a policy sees in one cycle: the cluster, the queue, the running jobs and the time.

The platform builds a ``PolicyView`` from its database and backend; the simulator from its state.
Both then call ``scheduler.policy.plan_cycle(view, policy)``. Time comes only from ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.model import ClusterSnapshot, JobRequest, Placement
from scheduler.policy.cohort import TeamQuota


@dataclass
class RunningJob:
    """A job holding GPUs now. ``request`` carries its priority, team, attained service (up to the start
    of this run), preemptibility and minimum run time; ``placements`` where its tasks run."""

    request: JobRequest
    placements: list[Placement]
    # Start of the current run (same clock as ``PolicyView.now``).
    started_at: float
    # Measured progress rate of the current run (1.0 = as fast as alone); None where not measured.
    rate: float | None = None
    # The job runs on GPUs beyond its team's guarantee (quota borrowing).
    borrowed: bool = False

    @property
    def job_id(self) -> str:
        return self.request.job_id

    @property
    def gpus(self) -> float:
        """GPU equivalents held: whole GPUs, or the share of one."""
        return sum(len(p.gpu_indices) * p.gpu_milli for p in self.placements) / 1000.0

    @property
    def shared(self) -> bool:
        return any(0 < p.gpu_milli < 1000 for p in self.placements)

    def attained_at(self, now: float) -> float:
        """Attained service (GPU-seconds) including the current run."""
        whole = sum(len(p.gpu_indices) for p in self.placements if p.gpu_milli >= 1000)
        held = whole if whole else len(self.request.tasks) if self.shared else 0
        return self.request.attained_gpu_s + held * max(0.0, now - self.started_at)


@dataclass
class PolicyView:
    """Input of ``plan_cycle``.

    - ``snapshot``: nodes with their usage, and the running placements (``snapshot.running``);
    - ``queue``: waiting jobs, in any order (the policy sorts them);
    - ``running``: the jobs behind ``snapshot.running``, with what preemption rules need;
    - ``now``: the cycle's time;
    - ``rounds``: whether the periodic rules (preemption, unpacking, drains) run in this call;
    - ``history``: the completed jobs' attained service, for the Gittins index
      (``scheduler.policy.queue_sort.ServiceHistory``); None = none known;
    - ``memo``: a cache kept across cycles by the caller (the interference plugin's verdicts);
    - ``quotas``: each team's quota state by team name (``scheduler.policy.cohort.TeamQuota``); None
      (the simulator without teams): no quota rules. With quotas the cohort's rules apply (limits,
      borrowing in fair-share order, reclaim; ``scheduler.policy.cohort``), and the ``priority`` and
      ``las`` rules preempt only within a team.
    """

    snapshot: ClusterSnapshot
    queue: list[JobRequest]
    running: list[RunningJob] = field(default_factory=list)
    now: float = 0.0
    rounds: bool = True
    history: Any = None
    memo: Any = None
    quotas: dict[str, TeamQuota] | None = None

"""Teams for ``manage.py replay --teams vc``: one platform team per trace team, with the guarantees
the simulator's team benchmarks give (``scheduler.bench.team_guarantees``), so that the replay and
``python -m scheduler fairness`` / ``eta-accuracy`` run the same experiment.

- **Team of a job:** ``team_guarantees.team_of`` (Philly's virtual cluster, ITP's model name; a job
  without one is charged to ``unassigned``). One platform ``Team`` per trace team, with one member
  (a user per team: the traces name no users), made through ``accounts.services`` as an
  administrator would.
- **Limits,** set with ``quotas.services.quota_set`` by that administrator (audited): the guarantee
  is ``guarantees_by_demand`` over the replayed slice (whole GPUs, in proportion to each team's
  GPU-seconds, adding up to the cluster); the maximum and the per-user cap are the whole cluster, as
  the simulator's ``TeamQuota.max_milli``; no lending limit; the concurrent-job and monthly GPU-hour
  limits at the largest values an administrator may set, so that only guarantees and the cohort's
  borrowing shape admission, as in the simulator (which has neither limit).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.utils.text import slugify

from accounts.models import Role, Team
from accounts.services import membership_set, team_create
from quotas.services import QUOTA_LIMITS, quota_set
from scheduler.bench.team_guarantees import guarantees_by_demand, team_of
from scheduler.model import GPU_MILLI
from scheduler.sim.trace import TraceJob

TEAM_MODES = ("vc",)
ADMIN_USERNAME = "replay-admin"
PREFIX = "vc-"


@dataclass(frozen=True)
class ReplayTeam:
    """A trace team as the platform holds it."""

    name: str  # the trace's team (team_of)
    team: Team
    user: Any
    guarantee_gpus: int


def slug_of(name: str) -> str:
    """The platform slug of trace team ``name`` (``vc-<name>``)."""
    return PREFIX + (slugify(name) or "team")


def set_up_teams(jobs: Iterable[TraceJob], total_gpus: int) -> dict[str, ReplayTeam]:
    """Create one team per trace team of ``jobs`` with its guarantee (module docstring); by team name."""
    guarantees = guarantees_by_demand(jobs, total_gpus)
    users = get_user_model().objects
    admin, _ = users.get_or_create(username=ADMIN_USERNAME, defaults={"is_staff": True, "is_superuser": True})
    whole = total_gpus * GPU_MILLI
    out: dict[str, ReplayTeam] = {}
    for name, gpus in sorted(guarantees.items()):
        slug = slug_of(name)
        team = Team.objects.filter(slug=slug).first() or team_create(
            name=f"Trace team {name}", slug=slug, actor=admin
        )
        user, _ = users.get_or_create(username=slug)
        membership_set(team=team, user=user, role=Role.MEMBER, actor=admin)
        quota_set(
            team=team,
            actor=admin,
            guaranteed_gpu_milli=gpus * GPU_MILLI,
            max_gpu_milli=whole,
            per_user_gpu_milli=whole,
            lending_limit_gpu_milli=None,
            max_concurrent_jobs=int(QUOTA_LIMITS["max_concurrent_jobs"]),
            gpu_hours_per_month=float(QUOTA_LIMITS["gpu_hours_per_month"]),
        )
        out[name] = ReplayTeam(name, team, user, gpus)
    return out


def owner_of(teams: dict[str, ReplayTeam], job: TraceJob) -> ReplayTeam:
    return teams[team_of(job)]

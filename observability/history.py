"""Persisted cluster history: sampling, downsampling with age, pruning, and the chart's points.

Resolution by age (issue 20): 1 minute for a day, 10 minutes for a month, 1 hour after that. Merged
rows are ``covered_s``-weighted means, so ``sum(value * covered_s)`` over any window that contains
whole buckets is the same before and after downsampling (tests/observability/test_history.py).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from observability.cluster_state import ClusterState
from observability.models import ClusterSample

SAMPLE_S = 60
# (rows older than this, at a resolution finer than the target) -> merged into buckets of the target.
DOWNSAMPLING = ((dt.timedelta(days=1), 600), (dt.timedelta(days=30), 3600))
# The chart's ranges and the step of their points.
RANGES: dict[str, tuple[dt.timedelta, int]] = {
    "1h": (dt.timedelta(hours=1), 60),
    "1d": (dt.timedelta(days=1), 300),
    "7d": (dt.timedelta(days=7), 600),
    "30d": (dt.timedelta(days=30), 3600),
}
FIELDS = ("capacity_milli", "allocated_milli", "fragmentation", "running", "waiting")
TEAM_FIELDS = ("allocated_milli", "running", "waiting")


def _floor(at: dt.datetime, step_s: int) -> dt.datetime:
    epoch = int(at.timestamp())
    return dt.datetime.fromtimestamp(epoch - epoch % step_s, tz=dt.UTC)


def history_record(
    *, state: ClusterState, now: dt.datetime | None = None, covered_s: float | None = None
) -> ClusterSample:
    """Store one sample of ``state`` in the minute that ``now`` falls in; it stands for ``covered_s``
    seconds (default: the sampling interval, HISTORY_SAMPLE_SECONDS), so that sampling more often
    than once a minute weighs each sample less instead of counting its minute twice."""
    now = now or timezone.now()
    if covered_s is None:
        covered_s = float(getattr(settings, "HISTORY_SAMPLE_SECONDS", SAMPLE_S) or SAMPLE_S)
    return ClusterSample.objects.create(
        at=_floor(now, SAMPLE_S),
        resolution_s=SAMPLE_S,
        covered_s=float(covered_s),
        capacity_milli=float(state.capacity_milli),
        allocated_milli=float(state.allocated_milli),
        fragmentation=float(state.fragmentation),
        running=float(state.running),
        waiting=float(state.waiting),
        by_team={
            slug: {"allocated_milli": t.allocated_milli, "running": t.running, "waiting": t.waiting}
            for slug, t in state.by_team.items()
        },
    )


def history_sample(*, now: dt.datetime | None = None) -> ClusterSample:
    """Sample the cluster from the configured backend and the database, then downsample."""
    from jobs.cluster import get_backend
    from observability.cluster_state import cluster_state

    now = now or timezone.now()
    sample = history_record(state=cluster_state(get_backend().snapshot()), now=now)
    history_downsample(now=now)
    return sample


@dataclass
class _Mean:
    """Running ``covered_s``-weighted mean of sample rows."""

    covered_s: float = 0.0

    def __post_init__(self) -> None:
        self.sums: dict[str, float] = defaultdict(float)
        self.teams: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def add(self, row: ClusterSample) -> None:
        weight = row.covered_s
        self.covered_s += weight
        for name in FIELDS:
            self.sums[name] += float(getattr(row, name)) * weight
        for slug, values in (row.by_team or {}).items():
            for name in TEAM_FIELDS:
                self.teams[slug][name] += float(values.get(name, 0.0)) * weight

    def mean(self, name: str) -> float:
        return self.sums[name] / self.covered_s if self.covered_s else 0.0

    def team_means(self) -> dict[str, dict[str, float]]:
        w = self.covered_s or 1.0
        return {slug: {n: v[n] / w for n in TEAM_FIELDS} for slug, v in sorted(self.teams.items())}


def _merge(rows: Iterable[ClusterSample], step_s: int) -> dict[dt.datetime, _Mean]:
    buckets: dict[dt.datetime, _Mean] = {}
    for row in rows:
        buckets.setdefault(_floor(row.at, step_s), _Mean()).add(row)
    return buckets


@transaction.atomic
def history_downsample(*, now: dt.datetime | None = None) -> int:
    """Merge rows past each age threshold into coarser buckets; returns the rows removed.

    Only whole buckets that end before the threshold are merged, so a bucket is merged once, from
    all its rows. Idempotent: a second call finds nothing finer than the target past the threshold.
    """
    now = now or timezone.now()
    removed = 0
    for age, step_s in DOWNSAMPLING:
        cutoff = _floor(now - age, step_s)
        rows = list(
            ClusterSample.objects.select_for_update()
            .filter(at__lt=cutoff, resolution_s__lt=step_s)
            .order_by("at", "id")
        )
        if not rows:
            continue
        merged = [
            ClusterSample(
                at=start,
                resolution_s=step_s,
                covered_s=mean.covered_s,
                **{name: mean.mean(name) for name in FIELDS},
                by_team=mean.team_means(),
            )
            for start, mean in _merge(rows, step_s).items()
        ]
        ClusterSample.objects.filter(pk__in=[r.pk for r in rows]).delete()
        ClusterSample.objects.bulk_create(merged)
        removed += len(rows) - len(merged)
    return removed


def history_prune(*, older_than: dt.timedelta, now: dt.datetime | None = None) -> int:
    """Delete history older than ``older_than``; returns the rows deleted."""
    now = now or timezone.now()
    deleted, _ = ClusterSample.objects.filter(at__lt=now - older_than).delete()
    return deleted


def history_points(*, range_name: str, now: dt.datetime | None = None) -> dict[str, Any]:
    """The chart's series for ``range_name`` (a key of RANGES): one point per step that has samples
    (gaps stay gaps), values the ``covered_s``-weighted means of the rows in the step."""
    span, step_s = RANGES[range_name]
    now = now or timezone.now()
    rows = ClusterSample.objects.filter(at__gte=_floor(now - span, step_s), at__lte=now).order_by("at", "id")
    points = []
    for start, mean in sorted(_merge(rows, step_s).items()):
        points.append(
            {
                "t": start.isoformat().replace("+00:00", "Z"),
                "capacity_milli": round(mean.mean("capacity_milli")),
                "allocated_milli": round(mean.mean("allocated_milli")),
                "fragmentation": round(mean.mean("fragmentation"), 4),
                "running": round(mean.mean("running")),
                "waiting": round(mean.mean("waiting")),
                "by_team": {
                    slug: {name: round(value) for name, value in values.items()}
                    for slug, values in mean.team_means().items()
                },
            }
        )
    return {"range": range_name, "step_s": step_s, "points": points}

"""Gauges and DB-derived counters computed at scrape time (a prometheus_client custom collector).

Each scrape reads the database, the cluster backend's snapshot and the heartbeats, so the numbers
are the state now, in every process alike: nothing is counted in memory that could drift or differ
between gunicorn workers. A backend that does not answer leaves out the GPU series and sets
``gpu_platform_backend_up`` to 0; the scrape itself never fails.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator

from django.db.models import (
    Case,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    IntegerField,
    Q,
    Sum,
    Value,
    When,
)
from django.db.models import CharField as CharValue
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from observability.cluster_state import WAITING_STATUSES, fragmentation, gpu_groups, team_allocations
from observability.queue_reasons import queue_reason

logger = logging.getLogger(__name__)

# Submit-to-start wait, seconds.
WAIT_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 14400.0, 43200.0, 86400.0)
# Job size by the GPUs it holds over all replicas (a shared GPU counts its share).
SIZES = ((999, "lt1"), (1000, "1"), (4000, "2-4"), (8000, "5-8"))
SIZE_LARGEST = "gt8"
# Relative error of a predicted normalised throughput against the measured one.
ERROR_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


class PlatformCollector(Collector):
    """The platform's state metrics; see docs/observability.md for the list."""

    def collect(self) -> Iterator[Metric]:
        parts = (
            self._queue,
            self._jobs,
            self._start_wait,
            self._cluster,
            self._teams,
            self._heartbeats,
            self._interference,
        )
        for part in parts:
            try:
                yield from part()
            except Exception:  # noqa: BLE001  (one broken part must not cost the whole scrape)
                logger.exception("metrics: %s failed", part.__name__)

    # ------------------------------------------------------------------ queue and jobs

    def _queue(self) -> Iterable[Metric]:
        from jobs.models import Job

        family = GaugeMetricFamily(
            "gpu_platform_queue_length",
            "Jobs waiting to be placed, by team and reason",
            labels=["team", "reason"],
        )
        counts: dict[tuple[str, str], int] = defaultdict(int)
        rows = Job.objects.filter(status__in=[s.value for s in WAITING_STATUSES]).values_list(
            "team__slug", "status", "pending_reason"
        )
        for team, status, reason in rows:
            counts[(team, queue_reason(status, reason))] += 1
        for (team, reason), n in sorted(counts.items()):
            family.add_metric([team, reason], n)
        yield family

    def _jobs(self) -> Iterable[Metric]:
        from jobs.models import Job
        from jobs.states import TERMINAL, JobStatus

        by_status = GaugeMetricFamily("gpu_platform_jobs", "Jobs by status", labels=["status"])
        counts = dict(
            Job.objects.order_by().values_list("status").annotate(n=Count("id")).values_list("status", "n")
        )
        for status in JobStatus:
            by_status.add_metric([status.value], counts.get(status.value, 0))
        yield by_status
        finished = CounterMetricFamily(
            "gpu_platform_jobs_finished",
            "Jobs that reached a final state, by team, state and failure category (from the job table)",
            labels=["team", "status", "failure_category"],
        )
        rows = (
            Job.objects.filter(status__in=[s.value for s in TERMINAL])
            .order_by()
            .values_list("team__slug", "status", "failure_category")
            .annotate(n=Count("id"))
        )
        for team, status, category, n in sorted(rows):
            finished.add_metric([team, status, category or ""], n)
        yield finished

    def _start_wait(self) -> Iterable[Metric]:
        """Submit-to-first-start of every job that started, as a histogram by team and size."""
        from jobs.models import Job

        milli = ExpressionWrapper(
            Case(When(gpus__gt=0, then=F("gpus") * 1000), default=F("gpu_milli"), output_field=IntegerField())
            * F("replicas"),
            output_field=IntegerField(),
        )
        size = Case(
            *(When(total_milli__lte=bound, then=Value(name)) for bound, name in SIZES),
            default=Value(SIZE_LARGEST),
            output_field=CharValue(),
        )
        wait = ExpressionWrapper(F("started_at") - F("submitted_at"), output_field=DurationField())
        buckets = {
            f"le_{i}": Count("id", filter=Q(wait__lte=dt.timedelta(seconds=b)))
            for i, b in enumerate(WAIT_BUCKETS)
        }
        rows = (
            Job.objects.filter(started_at__isnull=False, submitted_at__isnull=False)
            .annotate(total_milli=milli)
            .annotate(size=size, wait=wait)
            .order_by()
            .values("team__slug", "size")
            .annotate(n=Count("id"), total=Sum("wait"), **buckets)
        )
        family = HistogramMetricFamily(
            "gpu_platform_job_start_wait_seconds",
            "Time from submission to the first start of a job, by team and size (GPUs over all replicas)",
            labels=["team", "size"],
        )
        for row in sorted(rows, key=lambda r: (r["team__slug"], r["size"])):
            counts = [(_le(b), float(row[f"le_{i}"])) for i, b in enumerate(WAIT_BUCKETS)]
            counts.append(("+Inf", float(row["n"])))
            total = row["total"]
            seconds = total.total_seconds() if isinstance(total, dt.timedelta) else float(total or 0) / 1e6
            family.add_metric([row["team__slug"], row["size"]], counts, max(0.0, seconds))
        yield family

    # ------------------------------------------------------------------ cluster

    def _cluster(self) -> Iterable[Metric]:
        from jobs.cluster import get_backend

        up = GaugeMetricFamily("gpu_platform_backend_up", "1 when the cluster backend answered this scrape")
        try:
            snapshot = get_backend().snapshot()
        except Exception:  # noqa: BLE001
            logger.warning("metrics: the cluster backend did not answer", exc_info=True)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        groups = gpu_groups(snapshot)
        labels = ["node", "gpu_model"]
        families = {
            "capacity": GaugeMetricFamily(
                "gpu_platform_gpu_capacity_milli", "GPU capacity (1000 per GPU)", labels=labels
            ),
            "allocated": GaugeMetricFamily(
                "gpu_platform_gpu_allocated_milli", "GPU share allocated to tasks", labels=labels
            ),
            "idle": GaugeMetricFamily(
                "gpu_platform_gpu_idle_milli", "GPU share not allocated", labels=labels
            ),
            "stranded": GaugeMetricFamily(
                "gpu_platform_gpu_stranded_milli",
                "Free share on partly used GPUs (no whole GPU there)",
                labels=labels,
            ),
        }
        for g in groups:
            key = [g.node, g.gpu_model]
            families["capacity"].add_metric(key, g.capacity_milli)
            families["allocated"].add_metric(key, g.allocated_milli)
            families["idle"].add_metric(key, g.idle_milli)
            families["stranded"].add_metric(key, g.stranded_milli)
        yield from families.values()
        frag = GaugeMetricFamily(
            "gpu_platform_gpu_fragmentation_ratio", "Share of free GPU capacity stranded on partly used GPUs"
        )
        frag.add_metric([], fragmentation(groups))
        yield frag
        teams = GaugeMetricFamily(
            "gpu_platform_team_gpu_allocated_milli",
            "GPU share the team's tasks hold on the cluster",
            labels=["team"],
        )
        for slug, milli in sorted(team_allocations(snapshot).items()):
            teams.add_metric([slug], milli)
        yield teams

    # ------------------------------------------------------------------ teams and quotas

    def _teams(self) -> Iterable[Metric]:
        from quotas.models import Quota
        from quotas.selectors import gpu_hours_this_month
        from quotas.services import budget_gpu_hours

        labels = ["team"]
        used = GaugeMetricFamily(
            "gpu_platform_team_quota_used_milli",
            "GPU share reserved by the team's jobs (quota usage)",
            labels=labels,
        )
        guaranteed = GaugeMetricFamily(
            "gpu_platform_team_quota_guaranteed_milli", "The team's guaranteed GPU share", labels=labels
        )
        maximum = GaugeMetricFamily(
            "gpu_platform_team_quota_max_milli", "The team's maximum GPU share", labels=labels
        )
        hours = GaugeMetricFamily(
            "gpu_platform_team_gpu_hours_month", "GPU-hours the team used this month (UTC)", labels=labels
        )
        budget = GaugeMetricFamily(
            "gpu_platform_team_gpu_hours_budget",
            "The team's GPU-hour budget this month (monthly budget plus this month's grants)",
            labels=labels,
        )
        ratio = GaugeMetricFamily(
            "gpu_platform_team_budget_used_ratio",
            "GPU-hours this month over the monthly budget",
            labels=labels,
        )
        for quota in Quota.objects.select_related("team").order_by("team__slug"):
            slug = [quota.team.slug]
            used.add_metric(slug, quota.used_gpu_milli)
            guaranteed.add_metric(slug, quota.guaranteed_gpu_milli)
            maximum.add_metric(slug, quota.max_gpu_milli)
            month = gpu_hours_this_month(team=quota.team)
            hours.add_metric(slug, month)
            allowed = budget_gpu_hours(quota=quota)
            budget.add_metric(slug, allowed)
            ratio.add_metric(slug, month / allowed if allowed > 0 else 0.0)
        yield from (used, guaranteed, maximum, hours, budget, ratio)

    # ------------------------------------------------------------------ interference model

    def _interference(self) -> Iterable[Metric]:
        """The model's error on every co-location measured so far (jobs.ColocationMeasurement), as a
        histogram per GPU model: computed from the table, so it holds across restarts."""
        from jobs.models import ColocationMeasurement

        family = HistogramMetricFamily(
            "gpu_platform_interference_prediction_error_ratio",
            "|predicted - measured| / measured normalised throughput of co-located jobs, where measured",
            labels=["gpu_model"],
        )
        rows = ColocationMeasurement.objects.filter(
            Q(predicted_a__isnull=False) | Q(predicted_b__isnull=False)
        )
        values = rows.values_list("gpu_model", "norm_a", "predicted_a", "norm_b", "predicted_b")
        for model, errors in sorted(interference_errors(values).items()):
            buckets = [(_le(b), float(sum(1 for e in errors if e <= b))) for b in ERROR_BUCKETS]
            buckets.append(("+Inf", float(len(errors))))
            family.add_metric([model], buckets, sum(errors))
        yield family
        yield self._interference_model()

    @staticmethod
    def _interference_model() -> Metric:
        """Which interference model the scheduler loads: the retrained version in use, the hand-trained
        file, or ``none`` (``scheduler.interference.retrain.model_in_use``), as an info-style gauge."""
        from scheduler.interference.retrain import model_in_use
        from scheduler.interference.store import default_model_dir

        info = GaugeMetricFamily(
            "gpu_platform_interference_model_info",
            "The interference model in use (value 1; the name is the label)",
            labels=["model"],
        )
        info.add_metric([model_in_use(default_model_dir())], 1.0)
        return info

    # ------------------------------------------------------------------ heartbeats

    def _heartbeats(self) -> Iterable[Metric]:
        from jobs import heartbeat

        now = time.time()
        family = GaugeMetricFamily(
            "gpu_platform_heartbeat_age_seconds",
            "Seconds since the last scheduling cycle, status sync and reconcile pass completed "
            "(never seen: since this process started)",
            labels=["kind"],
        )
        # stale() with a negative threshold reports every kind, missing stamps counted like the
        # health check counts them.
        for kind, age in sorted(heartbeat.stale(max_age_s=-1.0, now=now).items()):
            family.add_metric([kind], age)
        yield family


def interference_errors(
    rows: Iterable[tuple[str, float, float | None, float, float | None]],
) -> dict[str, list[float]]:
    """Relative errors ``|predicted - measured| / measured`` per GPU model, from measured co-locations
    (gpu_model, norm_a, predicted_a, norm_b, predicted_b); a job without a prediction or with a
    measured throughput of 0 adds nothing."""
    out: dict[str, list[float]] = defaultdict(list)
    for model, norm_a, predicted_a, norm_b, predicted_b in rows:
        for measured, predicted in ((norm_a, predicted_a), (norm_b, predicted_b)):
            if predicted is not None and measured > 0:
                out[model or "unknown"].append(abs(predicted - measured) / measured)
    return dict(out)


def _le(bound: float) -> str:
    return f"{bound:g}" if bound != int(bound) else f"{int(bound)}.0"

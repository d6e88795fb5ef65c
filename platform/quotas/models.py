"""Team quotas and the usage ledger (one row per job that holds or held quota)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import Team


class Quota(models.Model):
    """Limits for one team. GPU amounts are in milli-GPU (1000 = one GPU)."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="quota")
    guaranteed_gpu_milli = models.PositiveIntegerField(default=0)
    max_gpu_milli = models.PositiveIntegerField(default=8000)
    max_concurrent_jobs = models.PositiveIntegerField(default=20)
    gpu_hours_per_month = models.FloatField(default=1000.0)
    per_user_gpu_milli = models.PositiveIntegerField(default=8000)
    # How much of its unused guarantee other teams may borrow (None: all of it).
    lending_limit_gpu_milli = models.PositiveIntegerField(null=True, blank=True)
    # Who may submit with the priority class ``urgent`` (set by an admin).
    urgent_users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="urgent_quotas")
    # The month ("2026-12") whose 80 % budget warning was already written: one warning a month.
    budget_warned_month = models.CharField(max_length=7, blank=True, default="")
    # Running totals kept by quota services under row locks (never edited by hand).
    used_gpu_milli = models.PositiveIntegerField(default=0)
    used_jobs = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"quota of {self.team}"


class UserUsage(models.Model):
    """Per-user running GPU total within a team, for the per-user cap (locked after the Quota row)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="user_usage")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="gpu_usage")
    used_gpu_milli = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="unique_user_usage")]


class UsageEntry(models.Model):
    """Ledger: the quota one admission of a job reserved, when it was released (end of the job, or its
    preemption), and the GPU-hours it consumed. A job preempted and admitted again has one row per
    admission; at most one of them is open (``released_at`` null)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="usage_entries")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="usage_entries")
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="usage_entries")
    gpu_milli = models.PositiveIntegerField()
    # The part of ``gpu_milli`` that is the team's excess over its guarantee now (borrowed GPUs): the
    # excess is marked on the newest open entries, again whenever the team's usage or guarantee
    # changes (quotas.services._remark). A released entry keeps its last mark.
    borrowed_gpu_milli = models.PositiveIntegerField(default=0)
    reserved_at = models.DateTimeField(default=timezone.now)
    released_at = models.DateTimeField(null=True, blank=True)
    gpu_hours = models.FloatField(default=0.0)

    class Meta:
        ordering = ["-reserved_at"]
        verbose_name_plural = "usage entries"
        # The open entries of a team, read at every admission and release to mark them again; the
        # team's closed entries (its whole history) stay out of that read.
        indexes = [
            models.Index(
                fields=["team", "-id"],
                condition=models.Q(released_at__isnull=True),
                name="quotas_usage_open_team_idx",
            )
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["job"],
                condition=models.Q(released_at__isnull=True),
                name="one_open_usage_entry_per_job",
            )
        ]


class RunUsage(models.Model):
    """Ledger: one row per run of a job, from RUNNING until its processes stopped (finished, failed,
    cancelled, requeued or preempted). A job's attained service is the sum over its rows, so it is
    kept across requeues; the quota's GPU-hours of a job are the sum of its runs' ``gpu_milli`` time."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="run_usage")
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="runs")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField()
    # GPUs as 2D-LAS counts them (a shared GPU counts as one: Tiresias' attained-service measure).
    gpus = models.PositiveIntegerField()
    # GPU share held (milli-GPU over all replicas): what the quota's GPU-hours count.
    gpu_milli = models.PositiveIntegerField()
    gpu_seconds = models.FloatField(help_text="Attained service of this run: gpus x seconds")
    ended_as = models.CharField(max_length=12, help_text="The job status that ended the run")

    class Meta:
        ordering = ["started_at", "id"]
        verbose_name_plural = "run usage"
        indexes = [models.Index(fields=["job", "started_at"])]

    def __str__(self) -> str:
        return f"run of job {self.job_id} from {self.started_at:%Y-%m-%d %H:%M:%S}"

    @property
    def gpu_hours(self) -> float:
        return self.gpu_milli / 1000.0 * max(0.0, (self.ended_at - self.started_at).total_seconds()) / 3600.0


class BudgetGrant(models.Model):
    """Extra GPU-hours an admin granted a team for one month (audited: who, when, why)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budget_grants")
    month = models.CharField(max_length=7, help_text='The month it counts for, "YYYY-MM" (UTC)')
    gpu_hours = models.FloatField()
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="budget_grants"
    )
    reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.gpu_hours:g} GPU-h for {self.team} in {self.month}"


class QuotaEvent(models.Model):
    """What happened to a team's quota: limit changes, budget grants, the 80 % budget warning."""

    class Kind(models.TextChoices):
        LIMITS_SET = "limits_set", "limits set"
        BUDGET_GRANT = "budget_grant", "budget grant"
        BUDGET_WARNING = "budget_warning", "budget warning"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_events")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    message = models.CharField(max_length=1000)
    actor = models.CharField(max_length=150)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

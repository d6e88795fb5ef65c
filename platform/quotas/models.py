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
    """Ledger: the quota a job reserved, when it was released, and the GPU-hours it consumed."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="usage_entries")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="usage_entries")
    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="usage_entry")
    gpu_milli = models.PositiveIntegerField()
    reserved_at = models.DateTimeField(default=timezone.now)
    released_at = models.DateTimeField(null=True, blank=True)
    gpu_hours = models.FloatField(default=0.0)

    class Meta:
        ordering = ["-reserved_at"]
        verbose_name_plural = "usage entries"

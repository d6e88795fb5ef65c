"""The cluster history table, and the run ledger as the admin's GPU usage page."""

from __future__ import annotations

from django.db import models

from quotas.models import RunUsage


class ClusterSample(models.Model):
    """The cluster averaged over ``covered_s`` seconds of sampled time from ``at`` on.

    Beat writes one row per minute (``resolution_s`` 60, ``covered_s`` 60); downsampling merges rows
    into 10-minute and then hourly rows whose values are the ``covered_s``-weighted means of the rows
    they replace, so every integral (e.g. allocated milli-GPU x seconds) is kept exactly.
    """

    at = models.DateTimeField(db_index=True, help_text="Start of the span (UTC)")
    resolution_s = models.PositiveIntegerField(help_text="Length of the span: 60, 600 or 3600")
    covered_s = models.FloatField(help_text="Seconds of sampled time the row stands for")
    capacity_milli = models.FloatField()
    allocated_milli = models.FloatField()
    fragmentation = models.FloatField(help_text="Share of free capacity stranded on partly used GPUs")
    running = models.FloatField()
    waiting = models.FloatField()
    # {team slug: {"allocated_milli": float, "running": float, "waiting": float}}
    by_team = models.JSONField(default=dict)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["resolution_s", "at"])]

    def __str__(self) -> str:
        return f"cluster sample {self.at:%Y-%m-%d %H:%M} ({self.resolution_s} s)"


class UsageRun(RunUsage):
    """The run ledger as the admin's "GPU usage" page (a proxy: no table of its own), where the
    monthly CSV export of every team's GPU-hours is an action."""

    class Meta:
        proxy = True
        verbose_name = "GPU usage run"
        verbose_name_plural = "GPU usage (run ledger)"

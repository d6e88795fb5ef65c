"""The job-image catalog."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class JobImage(models.Model):
    name = models.CharField(max_length=100)
    tag = models.CharField(max_length=100, default="latest")
    framework = models.CharField(max_length=50, blank=True)
    framework_version = models.CharField(max_length=50, blank=True)
    cuda_version = models.CharField(max_length=20, blank=True)
    min_driver = models.CharField(max_length=20, blank=True, help_text="Minimum NVIDIA driver, e.g. 535.54")
    python_version = models.CharField(max_length=20, blank=True)
    description = models.TextField(blank=True, max_length=4000)
    registry = models.CharField(max_length=200, blank=True, help_text="Registry prefix, e.g. ghcr.io/acme")
    dockerfile = models.CharField(max_length=300, blank=True)
    digest = models.CharField(max_length=100, blank=True)
    # Added for the standard-image catalog (images/catalog.py, `manage.py images sync|build`).
    accelerator = models.CharField(
        max_length=3, blank=True, choices=[("gpu", "GPU"), ("cpu", "CPU")], help_text="Empty: not declared"
    )
    base_image = models.CharField(max_length=300, blank=True, help_text="The image it is built FROM")
    labels = models.JSONField(default=dict, blank=True, help_text="Every label, inherited ones included")
    image_id = models.CharField(
        max_length=100,
        blank=True,
        help_text="Local image ID (sha256:...) of the last build that passed its smoke test",
    )
    built_at = models.DateTimeField(null=True, blank=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "tag"]
        constraints = [models.UniqueConstraint(fields=["name", "tag"], name="unique_image_tag")]

    def __str__(self) -> str:
        return self.reference

    @property
    def reference(self) -> str:
        prefix = f"{self.registry.rstrip('/')}/" if self.registry else ""
        return f"{prefix}{self.name}:{self.tag}"

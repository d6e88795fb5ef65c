"""Admin for the image catalog.

Catalog images (from ``images/dockerfiles``) are owned by ``manage.py images sync|build``: their
descriptive fields and build results are read-only here, and an admin only retires or restores them.
Custom images (no Dockerfile in the tree) are edited freely.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from images.models import JobImage
from images.services import is_catalog_row

# Written only by sync/build: hand edits would be overwritten or would lie about what was built.
BUILD_FIELDS = ("digest", "image_id", "built_at", "labels", "created_at", "updated_at")
CATALOG_FIELDS = (
    "name",
    "tag",
    "framework",
    "framework_version",
    "cuda_version",
    "min_driver",
    "python_version",
    "accelerator",
    "description",
    "dockerfile",
    "base_image",
)


@admin.register(JobImage)
class JobImageAdmin(admin.ModelAdmin):
    list_display = (
        "reference_display",
        "framework",
        "framework_version",
        "accelerator",
        "cuda_version",
        "min_driver",
        "python_version",
        "is_built",
        "is_active",
    )
    list_filter = ("is_active", "framework", "accelerator", "cuda_version")
    search_fields = ("name", "tag", "framework", "description")
    ordering = ("name", "tag")
    actions = ("retire", "restore")

    @admin.display(description="image", ordering="name")
    def reference_display(self, obj: JobImage) -> str:
        return obj.reference

    @admin.display(description="built", boolean=True)
    def is_built(self, obj: JobImage) -> bool:
        return bool(obj.image_id or obj.digest)

    def get_readonly_fields(self, request: HttpRequest, obj: JobImage | None = None) -> Any:
        if obj is not None and is_catalog_row(obj):
            return (*CATALOG_FIELDS, *BUILD_FIELDS)
        return BUILD_FIELDS

    @admin.action(description="Retire: hide from new jobs (running jobs keep their image)")
    def retire(self, request: HttpRequest, queryset: QuerySet[JobImage]) -> None:
        count = queryset.update(is_active=False, updated_at=timezone.now())
        self.message_user(request, f"{count} image(s) retired.", messages.SUCCESS)

    @admin.action(description="Restore: offer to new jobs again")
    def restore(self, request: HttpRequest, queryset: QuerySet[JobImage]) -> None:
        count = queryset.update(is_active=True, updated_at=timezone.now())
        self.message_user(request, f"{count} image(s) restored.", messages.SUCCESS)

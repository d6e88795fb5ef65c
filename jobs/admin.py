"""Django admin for jobs: read-only, with cancel going through jobs.services.job_cancel."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from jobs.models import ColocationMeasurement, Job, JobEvent, SoloProfile, Task
from jobs.services import JobConflict, job_cancel
from scheduler.interference.retrain import model_in_use
from scheduler.interference.store import default_model_dir


class TaskInline(admin.TabularInline):
    model = Task
    extra = 0
    can_delete = False
    fields = [
        "index",
        "name",
        "phase",
        "node",
        "gpu_indices",
        "gpu_milli",
        "gpu_memory_mib",
        "predicted_slowdown",
    ]
    readonly_fields = fields

    # Tasks are made by the binder from a placement; a hand-made row would have no pod behind it.
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    fields = ["created_at", "from_status", "to_status", "actor", "reason"]
    readonly_fields = fields

    # Events are written by job_transition only: the history is a record, not a form.
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "name",
        "team",
        "user",
        "status",
        "gpus",
        "gpu_milli",
        "replicas",
        "preemptible",
        "preemptions",
        "migrations",
        "created_at",
    ]
    list_filter = ["status", "team", "preemptible", "allow_sharing"]
    search_fields = ["name", "user__username", "team__slug"]
    inlines = [TaskInline, JobEventInline]
    actions = ["cancel"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [field.name for field in Job._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # jobs are submitted through job_submit (API, portal), which admits quota

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a job's history is kept; cancel it instead

    @admin.action(description="Cancel selected jobs")
    def cancel(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        done = 0
        for job in queryset:
            try:
                job_cancel(job=job, user=request.user, reason=f"cancelled by {request.user} in admin")
                done += 1
            except (JobConflict, PermissionDenied) as exc:
                messages.warning(request, f"job {job.pk}: {exc}")
        messages.success(request, f"Cancelled {done} job(s).")


@admin.register(SoloProfile)
class SoloProfileAdmin(admin.ModelAdmin):
    """Read-only: profiles come from the node agent through jobs.profiling_services."""

    list_display = ["image", "command", "gpu_model", "sm_util", "memory_util", "gpu_memory_mib", "samples"]
    list_filter = ["gpu_model", "model_family"]
    search_fields = ["image", "command", "model_family"]
    date_hierarchy = "measured_at"

    # Empty utilisations were not measured (the simulated backend): say so rather than show a dash
    # that reads like a zero.
    @admin.display(description="SM util %", ordering="gpu_util", empty_value="not measured")
    def sm_util(self, obj: SoloProfile) -> float | None:
        return obj.gpu_util

    @admin.display(description="memory util %", ordering="mem_util", empty_value="not measured")
    def memory_util(self, obj: SoloProfile) -> float | None:
        return obj.mem_util

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [field.name for field in SoloProfile._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(ColocationMeasurement)
class ColocationMeasurementAdmin(admin.ModelAdmin):
    """Read-only: measurements come from the co-location sweep (jobs.colocation). The list's title
    names the interference model in use (scheduler.interference.retrain.model_in_use)."""

    list_display = [
        "measured_at",
        "image_a",
        "image_b",
        "gpu_model",
        "norm_a",
        "norm_b",
        "predicted_a",
        "predicted_b",
    ]
    list_filter = ["gpu_model"]
    search_fields = ["image_a", "image_b"]
    date_hierarchy = "measured_at"

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        title = f"Co-location measurements (interference model in use: {model_in_use(default_model_dir())})"
        return super().changelist_view(request, {**(extra_context or {}), "title": title})

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [field.name for field in ColocationMeasurement._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

"""Django admin for quotas and the usage ledger. Limits change through quotas.services.quota_set (the
service the API's PATCH /quotas/{team}/ uses); running totals and the ledger are read-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from quotas.models import Quota, UsageEntry
from quotas.selectors import gpu_hours_this_month
from quotas.services import QUOTA_LIMITS, quota_limit_errors, quota_set


class QuotaForm(forms.ModelForm):
    """Shows quota_set's field messages on the form instead of failing on save."""

    class Meta:
        model = Quota
        fields = ["team", *QUOTA_LIMITS]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        limits = {name: cleaned[name] for name in QUOTA_LIMITS if cleaned.get(name) is not None}
        current = Quota.objects.filter(pk=self.instance.pk).first() or Quota()
        for field, messages in quota_limit_errors(quota=current, limits=limits).items():
            for message in messages:
                self.add_error(field if field in self.fields else None, message)
        return cleaned


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    form = QuotaForm
    list_display = [
        "team",
        "guaranteed_gpu_milli",
        "max_gpu_milli",
        "used_gpu_milli",
        "max_concurrent_jobs",
        "used_jobs",
        "per_user_gpu_milli",
        "gpu_hours_per_month",
        "hours_this_month",
    ]
    search_fields = ["team__name", "team__slug"]
    readonly_fields = ["used_gpu_milli", "used_jobs", "updated_at", "hours_this_month"]
    fields = ["team", *QUOTA_LIMITS, *readonly_fields]

    @admin.display(description="GPU-hours this month")
    def hours_this_month(self, quota: Quota) -> str:
        return f"{gpu_hours_this_month(team=quota.team):.2f}" if quota.pk else "-"

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # The team of an existing quota is fixed: moving limits between teams is two edits.
        return [*self.readonly_fields, "team"] if obj is not None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: Quota, form: Any, change: bool) -> None:
        limits = {name: form.cleaned_data[name] for name in QUOTA_LIMITS if name in form.cleaned_data}
        saved = quota_set(team=obj.team, actor=request.user, **limits)
        obj.pk = saved.pk


@admin.register(UsageEntry)
class UsageEntryAdmin(admin.ModelAdmin):
    list_display = ["job", "team", "user", "gpu_milli", "reserved_at", "released_at", "gpu_hours"]
    list_filter = ["team"]
    search_fields = ["team__slug", "user__username"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

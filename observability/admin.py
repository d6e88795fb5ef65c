"""Admin: the run ledger (read-only) with an action that exports every team's GPU-hours of a month."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from config.admin_records import RecordAdmin
from observability.models import UsageRun
from observability.usage import parse_month, usage_csv, usage_report

EXPORT_GROUPS = ["team", "user", "image"]


class MonthForm(forms.Form):
    month = forms.CharField(max_length=7, help_text="YYYY-MM (UTC)")

    def clean_month(self) -> str:
        month = self.cleaned_data["month"].strip()
        try:
            parse_month(month)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        return month


@admin.register(UsageRun)
class UsageRunAdmin(RecordAdmin):
    list_display = ["job", "team", "user", "started_at", "ended_at", "gpu_milli", "hours", "ended_as"]
    list_filter = ["team", "ended_as"]
    date_hierarchy = "started_at"
    actions = ["export_month_csv"]
    list_select_related = ["team", "job__user"]

    @admin.display(description="user")
    def user(self, run: UsageRun) -> str:
        return run.job.user.username

    @admin.display(description="GPU-hours")
    def hours(self, run: UsageRun) -> str:
        return f"{run.gpu_hours:.4f}"

    @admin.action(description="Export all teams' GPU usage of a month as CSV", permissions=["view"])
    def export_month_csv(self, request: HttpRequest, queryset: QuerySet[UsageRun]) -> HttpResponse:
        form = MonthForm(
            request.POST if "apply" in request.POST else None, initial={"month": f"{timezone.now():%Y-%m}"}
        )
        if form.is_valid():
            month = form.cleaned_data["month"]
            rows = usage_report(group_by=EXPORT_GROUPS, month=month)
            response = HttpResponse(usage_csv(rows, EXPORT_GROUPS), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="gpu-usage-{month}.csv"'
            return response
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "queryset": queryset,
            "title": "Export GPU usage",
        }
        return TemplateResponse(request, "admin/observability/usage_export.html", context)

"""Django admin for quotas: one screen per team (guarantee, maximum, lending limit, borrowed now,
decayed usage, fair-share factor, budget used this month, waiting jobs and their reasons), budget
grants and the quota events. Every change goes through quotas.services (quota_set, the service the
API's PATCH /quotas/{team}/ uses; quota_set_urgent_users; budget_grant), each with an audit event;
running totals, the ledger and the events are read-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html_join

from config.admin_records import RecordAdmin
from quotas.models import BudgetGrant, Quota, QuotaEvent, UsageEntry
from quotas.selectors import QuotaUsage, quota_usage
from quotas.services import (
    NULLABLE_LIMITS,
    QUOTA_LIMITS,
    budget_grant,
    quota_limit_errors,
    quota_set,
    quota_set_urgent_users,
)

# How each limit reads in the form. GPU amounts are shown and typed in GPUs (0.25 = a quarter of
# one GPU) and stored in milli-GPU by quota_set; a limit missing here still shows, with its raw name.
LIMIT_TEXT: dict[str, tuple[str, str]] = {
    "guaranteed_gpu_milli": (
        "Guaranteed GPUs",
        "GPUs the team can always get: its jobs may preempt borrowers to reach this. 0 = no guarantee.",
    ),
    "max_gpu_milli": (
        "Maximum GPUs",
        "The most GPUs the team's jobs may hold at once, borrowing included. At least the guarantee.",
    ),
    "max_concurrent_jobs": (
        "Maximum jobs at once",
        "Jobs that hold quota (queued or admitted up to running) at the same time; more are refused.",
    ),
    "gpu_hours_per_month": (
        "GPU-hours per month",
        "Budget of GPU-hours per calendar month (UTC); a warning is written at 80 %.",
    ),
    "per_user_gpu_milli": (
        "Maximum GPUs per user",
        "The most GPUs one member's jobs in this team may hold at once.",
    ),
    "lending_limit_gpu_milli": (
        "GPUs others may borrow",
        "How much of the unused guarantee other teams may borrow; empty = all of it.",
    ),
}
MILLI = 1000


def _gpu_name(limit: str) -> str:
    return limit.removesuffix("_gpu_milli") + "_gpus"


def _limit_field(limit: str) -> forms.Field:
    label, help_text = LIMIT_TEXT.get(limit, (limit.replace("_", " ").capitalize(), ""))
    required = limit not in NULLABLE_LIMITS
    if limit.endswith("_gpu_milli"):
        return forms.DecimalField(
            label=label,
            help_text=help_text + " In GPUs, to 3 decimals.",
            min_value=0,
            max_value=QUOTA_LIMITS[limit] / MILLI,
            decimal_places=3,
            required=required,
        )
    if isinstance(QUOTA_LIMITS[limit], float):
        return forms.FloatField(
            label=label, help_text=help_text, min_value=0, max_value=QUOTA_LIMITS[limit], required=required
        )
    return forms.IntegerField(
        label=label, help_text=help_text, min_value=0, max_value=int(QUOTA_LIMITS[limit]), required=required
    )


def _readable(message: str) -> str:
    """quota_set's message with its field names as the form labels them (max_gpu_milli -> Maximum GPUs)."""
    for limit, (label, _) in LIMIT_TEXT.items():
        message = message.replace(limit, label)
    return message


def _form_name(limit: str) -> str:
    return _gpu_name(limit) if limit.endswith("_gpu_milli") else limit


class _QuotaLimitsForm(forms.ModelForm):
    """The limits in GPUs with help text; quota_set's field messages show on the form instead of
    failing on save. ``limits`` (after clean) holds them as quota_set takes them, in milli-GPU."""

    class Meta:
        model = Quota
        fields = ["team", "urgent_users"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for limit in QUOTA_LIMITS:
            stored = getattr(self.instance, limit, None)
            if stored is None and self.instance.pk is None:
                stored = Quota._meta.get_field(limit).get_default()
            if stored is not None:
                self.initial[_form_name(limit)] = (
                    f"{stored / MILLI:g}" if limit.endswith("_gpu_milli") else stored
                )
        self.limits: dict[str, Any] = {}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        limits: dict[str, Any] = {}
        for limit in QUOTA_LIMITS:
            name = _form_name(limit)
            if name not in cleaned:
                continue
            value = cleaned[name]
            if value is None:
                if limit in NULLABLE_LIMITS:
                    limits[limit] = None
                continue
            limits[limit] = round(value * MILLI) if limit.endswith("_gpu_milli") else value
        current = Quota.objects.filter(pk=self.instance.pk).first() or Quota()
        for field, messages in quota_limit_errors(quota=current, limits=limits).items():
            shown = _form_name(field)
            for message in messages:
                self.add_error(shown if shown in self.fields else None, _readable(message))
        self.limits = limits
        return cleaned


# One declared form field per limit (the admin builds its form from declared fields and model fields
# only), made from QUOTA_LIMITS so a new limit shows without an edit here.
QuotaForm = type(
    "QuotaForm",
    (_QuotaLimitsForm,),
    {"__module__": __name__, **{_form_name(limit): _limit_field(limit) for limit in QUOTA_LIMITS}},
)


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    form = QuotaForm
    list_display = [
        "team",
        "guaranteed_gpus",
        "max_gpus",
        "lending_limit_gpus",
        "used_gpus",
        "borrowed_now",
        "max_concurrent_jobs",
        "used_jobs",
        "per_user_gpus",
        "fair_share",
        "budget_used",
        "waiting",
    ]

    @admin.display(description="Guaranteed GPUs")
    def guaranteed_gpus(self, quota: Quota) -> str:
        return f"{quota.guaranteed_gpu_milli / MILLI:g}"

    @admin.display(description="Maximum GPUs")
    def max_gpus(self, quota: Quota) -> str:
        return f"{quota.max_gpu_milli / MILLI:g}"

    @admin.display(description="Maximum GPUs per user")
    def per_user_gpus(self, quota: Quota) -> str:
        return f"{quota.per_user_gpu_milli / MILLI:g}"

    @admin.display(description="GPUs others may borrow")
    def lending_limit_gpus(self, quota: Quota) -> str:
        limit = quota.lending_limit_gpu_milli
        return "all unused" if limit is None else f"{limit / MILLI:g}"

    search_fields = ["team__name", "team__slug"]
    readonly_fields = [
        "used_gpus",
        "borrowed_now",
        "used_jobs",
        "updated_at",
        "hours_this_month",
        "budget_used",
        "decayed_usage",
        "fair_share",
        "waiting_jobs",
    ]
    filter_horizontal = ["urgent_users"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["team", *(_form_name(n) for n in QUOTA_LIMITS), "urgent_users", *self.readonly_fields]

    def _usage(self, quota: Quota) -> QuotaUsage:
        # One read per quota and request: the computed columns below share it.
        cache = self.__dict__.setdefault("_usage_cache", {})
        if quota.pk not in cache:
            cache[quota.pk] = quota_usage(team=quota.team)
        return cache[quota.pk]

    @admin.display(description="GPUs in use")
    def used_gpus(self, quota: Quota) -> str:
        return f"{quota.used_gpu_milli / MILLI:g}" if quota.pk else "-"

    @admin.display(description="Borrowed now (GPUs)")
    def borrowed_now(self, quota: Quota) -> str:
        return f"{self._usage(quota).borrowed_gpu_milli / MILLI:g}" if quota.pk else "-"

    @admin.display(description="GPU-hours this month")
    def hours_this_month(self, quota: Quota) -> str:
        return f"{self._usage(quota).gpu_hours_this_month:.2f}" if quota.pk else "-"

    @admin.display(description="Budget used this month")
    def budget_used(self, quota: Quota) -> str:
        if not quota.pk:
            return "-"
        u = self._usage(quota)
        warn = " - warning: over 80 %" if u.budget_warning else ""
        return f"{u.gpu_hours_this_month:.1f} of {u.budget_gpu_hours:g} GPU-h ({u.budget_used_fraction:.0%}){warn}"

    @admin.display(description="Decayed usage (GPU-h)")
    def decayed_usage(self, quota: Quota) -> str:
        return f"{self._usage(quota).decayed_gpu_hours:.2f}" if quota.pk else "-"

    @admin.display(description="Fair-share factor")
    def fair_share(self, quota: Quota) -> str:
        return f"{self._usage(quota).fair_share_factor:.3f}" if quota.pk else "-"

    @admin.display(description="Waiting jobs")
    def waiting(self, quota: Quota) -> int:
        return len(self._usage(quota).waiting_jobs) if quota.pk else 0

    @admin.display(description="Waiting jobs and their reasons")
    def waiting_jobs(self, quota: Quota) -> str:
        waiting = self._usage(quota).waiting_jobs if quota.pk else ()
        if not waiting:
            return "-"
        rows = ((w.job_id, w.name, w.reason or "waiting for the next cycle") for w in waiting)
        return format_html_join("", "<div>job {} ({}): {}</div>", rows)

    def get_queryset(self, request: HttpRequest) -> Any:
        self.__dict__["_usage_cache"] = {}
        return super().get_queryset(request).select_related("team")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        self.__dict__["_usage_cache"] = {}
        # The team of an existing quota is fixed: moving limits between teams is two edits.
        return [*self.readonly_fields, "team"] if obj is not None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: Quota, form: Any, change: bool) -> None:
        saved = quota_set(team=obj.team, actor=request.user, **form.limits)
        obj.pk = saved.pk

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # Who may submit urgent jobs changes through its service (audited), not the form's m2m save.
        if "urgent_users" in form.cleaned_data:
            team = Quota.objects.select_related("team").get(pk=form.instance.pk).team
            quota_set_urgent_users(team=team, users=form.cleaned_data["urgent_users"], actor=request.user)
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)


@admin.register(UsageEntry)
class UsageEntryAdmin(RecordAdmin):
    list_display = [
        "job", "team", "user", "gpu_milli", "borrowed_gpu_milli", "reserved_at", "released_at", "gpu_hours",
    ]  # fmt: skip
    list_filter = ["team"]
    search_fields = ["team__slug", "user__username"]


class BudgetGrantForm(forms.ModelForm):
    class Meta:
        model = BudgetGrant
        fields = ["team", "month", "gpu_hours", "reason"]


@admin.register(BudgetGrant)
class BudgetGrantAdmin(admin.ModelAdmin):
    """Grants are added, never changed or deleted: the audit trail stays whole."""

    form = BudgetGrantForm
    list_display = ["team", "month", "gpu_hours", "granted_by", "reason", "created_at"]
    list_filter = ["team", "month"]

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        from quotas.services import month_key

        return {"month": month_key()}

    def save_model(self, request: HttpRequest, obj: BudgetGrant, form: Any, change: bool) -> None:
        saved = budget_grant(
            team=obj.team, gpu_hours=obj.gpu_hours, actor=request.user, reason=obj.reason, month=obj.month
        )
        obj.pk = saved.pk

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(QuotaEvent)
class QuotaEventAdmin(RecordAdmin):
    list_display = ["created_at", "team", "kind", "message", "actor"]
    list_filter = ["team", "kind"]

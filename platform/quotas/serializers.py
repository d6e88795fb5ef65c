"""Output and input shapes of the quotas API (quotas.selectors.QuotaUsage, quotas.services.quota_set)."""

from __future__ import annotations

from rest_framework import serializers

from config.api import StrictInputMixin
from quotas.services import MAX_GRANT_GPU_HOURS, QUOTA_LIMITS


class WaitingJobOutput(serializers.Serializer):
    job_id = serializers.IntegerField()
    name = serializers.CharField()
    reason = serializers.CharField(help_text="Why it waits: quota, budget, capacity, ...")


class QuotaUsageOutput(serializers.Serializer):
    """GPU amounts in milli-GPU (1000 = one GPU); ``caller_gpu_milli`` is what you hold yourself.
    Quota is held by admitted jobs (not by queued ones); see docs/quotas.md."""

    team_id = serializers.IntegerField()
    team_slug = serializers.CharField()
    team_name = serializers.CharField()
    guaranteed_gpu_milli = serializers.IntegerField()
    max_gpu_milli = serializers.IntegerField()
    used_gpu_milli = serializers.IntegerField()
    free_gpu_milli = serializers.IntegerField()
    max_concurrent_jobs = serializers.IntegerField()
    used_jobs = serializers.IntegerField()
    per_user_gpu_milli = serializers.IntegerField()
    caller_gpu_milli = serializers.IntegerField()
    gpu_hours_per_month = serializers.FloatField()
    gpu_hours_this_month = serializers.FloatField()
    updated_at = serializers.DateTimeField()
    lending_limit_gpu_milli = serializers.IntegerField(
        allow_null=True, help_text="How much of the unused guarantee others may borrow (null: all of it)."
    )
    borrowed_gpu_milli = serializers.IntegerField(help_text="Held now beyond the guarantee (borrowed).")
    decayed_gpu_hours = serializers.FloatField(help_text="GPU-hours with the usage half-life's decay.")
    fair_share_factor = serializers.FloatField(help_text="2^(-usage share / guarantee share); 1 = unused.")
    budget_gpu_hours = serializers.FloatField(help_text="This month's budget: monthly hours plus grants.")
    budget_used_fraction = serializers.FloatField()
    budget_warning = serializers.BooleanField(help_text="At least 80 % of this month's budget is used.")
    waiting_jobs = WaitingJobOutput(many=True, help_text="Queued jobs of the team and why they wait.")


class QuotaUpdateInput(StrictInputMixin, serializers.Serializer):
    """Limits to change; omitted ones keep their value."""

    guaranteed_gpu_milli = serializers.IntegerField(
        min_value=0, max_value=int(QUOTA_LIMITS["guaranteed_gpu_milli"]), required=False
    )
    max_gpu_milli = serializers.IntegerField(
        min_value=0, max_value=int(QUOTA_LIMITS["max_gpu_milli"]), required=False
    )
    max_concurrent_jobs = serializers.IntegerField(
        min_value=0, max_value=int(QUOTA_LIMITS["max_concurrent_jobs"]), required=False
    )
    gpu_hours_per_month = serializers.FloatField(
        min_value=0, max_value=QUOTA_LIMITS["gpu_hours_per_month"], required=False
    )
    per_user_gpu_milli = serializers.IntegerField(
        min_value=0, max_value=int(QUOTA_LIMITS["per_user_gpu_milli"]), required=False
    )
    lending_limit_gpu_milli = serializers.IntegerField(
        min_value=0, max_value=int(QUOTA_LIMITS["lending_limit_gpu_milli"]), required=False, allow_null=True
    )


class BudgetGrantInput(StrictInputMixin, serializers.Serializer):
    """Extra GPU-hours for this month (quota admins; audited)."""

    gpu_hours = serializers.FloatField(min_value=0.001, max_value=MAX_GRANT_GPU_HOURS)
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")

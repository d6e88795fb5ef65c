"""Output and input shapes of the quotas API (quotas.selectors.QuotaUsage, quotas.services.quota_set)."""

from __future__ import annotations

from rest_framework import serializers

from config.api import StrictInputMixin
from quotas.services import QUOTA_LIMITS


class QuotaUsageOutput(serializers.Serializer):
    """GPU amounts in milli-GPU (1000 = one GPU); ``caller_gpu_milli`` is what you hold yourself."""

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

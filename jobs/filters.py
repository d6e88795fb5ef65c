"""Query filters of GET /api/v1/jobs/: ?status=QUEUED,RUNNING&team=3&user=alice."""

from __future__ import annotations

import django_filters

from jobs.models import STATUS_CHOICES, Job


class StatusInFilter(django_filters.BaseInFilter, django_filters.ChoiceFilter):
    """Comma-separated statuses; an unknown one is a 400 with a field message."""


class JobFilter(django_filters.FilterSet):
    status = StatusInFilter(choices=STATUS_CHOICES, help_text="One status or several, comma-separated.")
    team = django_filters.NumberFilter(field_name="team_id", help_text="Team id.")
    team_slug = django_filters.CharFilter(field_name="team__slug", help_text="Team slug.")
    user = django_filters.CharFilter(field_name="user__username", help_text="Username of the submitter.")
    image = django_filters.NumberFilter(field_name="image_id", help_text="Image id.")
    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Job
        fields: list[str] = []

"""Query filters of GET /api/v1/jobs/: ?status=QUEUED,RUNNING&team=3&user=alice&name=resnet."""

from __future__ import annotations

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field

from config.filters import StrictFilterSet, TextFilter
from jobs.models import STATUS_CHOICES, Job

# Ids are 64-bit signed in every database the platform runs on.
MAX_ID = 2**63 - 1


class StatusInFilter(django_filters.BaseInFilter, django_filters.ChoiceFilter):
    """Comma-separated statuses; an unknown one is a 400 with a field message."""


class IdField(forms.IntegerField):
    def __init__(self, **kwargs: object) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(**kwargs)  # type: ignore[arg-type]


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_ID})
class IdFilter(django_filters.NumberFilter):
    """A whole-number id: ``1e30`` or ``99999999999999999999`` are a 400 with a field message.
    (NumberFilter parses a Decimal, which the database driver then fails to convert: a 500.)"""

    field_class = IdField


class JobFilter(StrictFilterSet):
    status = StatusInFilter(choices=STATUS_CHOICES, help_text="One status or several, comma-separated.")
    team = IdFilter(field_name="team_id", help_text="Team id.")
    team_slug = TextFilter(field_name="team__slug", help_text="Team slug.")
    user = TextFilter(field_name="user__username", help_text="Username of the submitter.")
    name = TextFilter(
        field_name="name", lookup_expr="icontains", help_text="Part of the job's name (any case)."
    )
    image = IdFilter(field_name="image_id", help_text="Image id.")
    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Job
        fields: list[str] = []

"""Query-string filters that hold to the schema they publish (django-filter is lenient by default).

- A typed parameter (a number, a date-time, a boolean, a choice) given with an empty or unparsable
  value is a 400 with a field message, not silently ignored: ``?is_active=null`` used to list every
  image, ``?created_before=`` every job.
- Text parameters accept any string. One with a NUL character can match nothing stored (PostgreSQL
  cannot even take it in a query), so it filters to no rows instead of failing.

``FilterBackend`` (settings.REST_FRAMEWORK) builds views' ``filterset_fields`` on ``StrictFilterSet``;
a view's own ``filterset_class`` should derive from it too.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.core.validators import ProhibitNullCharactersValidator
from django.db import models
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema_field


class TextField(forms.CharField):
    """A CharField that lets NUL through (the filter then matches nothing) instead of refusing it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        kept: list[Any] = [
            v for v in getattr(self, "validators", []) if not isinstance(v, ProhibitNullCharactersValidator)
        ]
        self.validators = kept


class TextFilter(django_filters.CharFilter):
    field_class = TextField

    def filter(self, qs: Any, value: Any) -> Any:
        if isinstance(value, str) and "\x00" in value:
            return qs.none()
        return super().filter(qs, value)


class StrictBooleanField(forms.Field):
    widget = forms.TextInput
    TRUE = frozenset({"true", "1"})
    FALSE = frozenset({"false", "0"})

    def to_python(self, value: Any) -> bool | None:
        if value in (None, ""):
            return None
        if isinstance(value, bool):
            return value
        lowered = str(value).strip().lower()
        if lowered in self.TRUE:
            return True
        if lowered in self.FALSE:
            return False
        raise forms.ValidationError("Use true or false.", code="invalid")


@extend_schema_field({"type": "boolean"})
class StrictBooleanFilter(django_filters.BooleanFilter):
    field_class = StrictBooleanField


class StrictFilterForm(forms.Form):
    """Refuses an empty value for the parameters named in ``non_empty`` (set per filterset)."""

    non_empty: frozenset[str] = frozenset()

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for name in self.non_empty:
            if name in self.data and self.data.get(name) == "" and name not in self.errors:
                self.add_error(name, forms.ValidationError("Give a value or leave the parameter out."))
        return cleaned


class StrictFilterSet(django_filters.FilterSet):
    FILTER_DEFAULTS = {
        **django_filters.FilterSet.FILTER_DEFAULTS,
        models.CharField: {"filter_class": TextFilter},
        models.SlugField: {"filter_class": TextFilter},
        models.TextField: {"filter_class": TextFilter},
        models.BooleanField: {"filter_class": StrictBooleanFilter},
    }

    def get_form_class(self) -> type[forms.Form]:
        # Built here rather than through Meta.form, which the backend's generated filtersets (and any
        # subclass with a Meta of its own) would not inherit.
        fields: dict[str, Any] = {name: f.field for name, f in self.filters.items()}
        # Text parameters may be empty (an empty string is a string), and so may lists (``?status=``
        # is the empty list: no filter); every other kind may not.
        fields["non_empty"] = frozenset(
            name
            for name, f in self.filters.items()
            if not isinstance(f, django_filters.CharFilter | django_filters.filters.BaseCSVFilter)
        )
        return type(f"{type(self).__name__}Form", (StrictFilterForm,), fields)


class FilterBackend(DjangoFilterBackend):
    filterset_base = StrictFilterSet

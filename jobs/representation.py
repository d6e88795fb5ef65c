"""The job serializers' answers built from a plan compiled once per serializer class, instead of DRF's
per-field walk on every object.

DRF's ``Serializer.to_representation`` does, for every field of every object, a field lookup, a
``get_attribute`` through ``source_attrs`` (with its ``Mapping``, callable and default handling) and
the field's ``to_representation``; a ``ModelSerializer`` also builds its ~45 fields once per
serializer instance. For a page of 50 jobs that was most of a list's CPU (issue 23). The plan keeps
what DRF would do for the field types these serializers use, and nothing else:

- a model value (``IntegerField``, ``FloatField``, ``CharField``, ``BooleanField``, ``ChoiceField``,
  ``JSONField``, ``DateTimeField``, ``PrimaryKeyRelatedField``): read through the same ``source``
  with ``operator.attrgetter``; None stays None; else converted as that field's
  ``to_representation`` converts it;
- a ``SerializerMethodField``: the serializer's method, as DRF calls it;
- a nested ``many=True`` serializer whose class is planned too: each item through its plan.

The serializer's declared fields stay as they are, so the OpenAPI schema is unchanged. Whatever the
plan does not cover falls back to DRF itself: a class with another field type gets no plan (None), and
an object the plan cannot read the way DRF would (a missing attribute DRF would answer with a default
or skip, a callable DRF would call, a naive datetime, an out-of-range one) is represented by DRF's own
``to_representation``. tests/api/test_job_output_representation.py holds both paths to one answer.

``known`` (the serializer context's ``KNOWN_KEY``): answers a caller already has for some keys, already
in their output form, used instead of computing them; e.g. the submit's 201 answer knows a job it has
just queued has no tasks (jobs.api).
"""

from __future__ import annotations

import functools
import threading
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from django.conf import settings
from django.core.exceptions import FieldDoesNotExist, ObjectDoesNotExist
from django.db.models.manager import BaseManager
from django.utils import timezone
from rest_framework import fields as drf_fields
from rest_framework import relations, serializers
from rest_framework.settings import api_settings

KNOWN_KEY = "known_output"

# What a step is: a model value converted, a datetime (its time zone is the request's), a serializer
# method, or a nested list of planned objects.
VALUE, DATETIME, METHOD, MANY = range(4)


# What DRF's get_attribute calls when an attribute holds it (fields.is_simple_callable), or refuses to.
_CALLED_BY_DRF = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, functools.partial)


class _Fallback(Exception):
    """The plan cannot say what DRF would for this object: let DRF represent it."""


def _same(value: Any) -> Any:
    return value


def _boolean(field: serializers.BooleanField) -> Callable[[Any], Any]:
    # A model's BooleanField holds a bool, which DRF answers as itself; anything else goes through DRF's
    # own truth table (strings such as "yes", and null when the field allows it).
    def convert(value: Any) -> Any:
        return value if value is True or value is False else field.to_representation(value)

    return convert


def _choice(field: serializers.ChoiceField) -> Callable[[Any], Any]:
    strings = field.choice_strings_to_values

    def convert(value: Any) -> Any:
        if type(value) is str:  # an Enum member (even a str one) goes through DRF's Enum handling
            return value if value == "" else strings.get(value, value)
        return field.to_representation(value)

    return convert


def _converter(field: serializers.Field) -> Callable[[Any], Any] | None:
    """How the field's to_representation converts a non-None value, for the exact DRF types whose
    conversion is this simple; None for any other type (or subclass, which may override it)."""
    kind = type(field)
    if kind is serializers.IntegerField:
        return int
    if kind is serializers.BigIntegerField:
        return field.to_representation  # (it reads COERCE_BIGINT_TO_STRING as it converts)
    if kind is serializers.FloatField:
        return float
    if kind is serializers.CharField:
        return str
    if kind is serializers.BooleanField:
        return _boolean(field)  # type: ignore[arg-type]
    if kind is serializers.ChoiceField:
        return _choice(field)  # type: ignore[arg-type]
    if kind is serializers.JSONField and not field.binary:  # type: ignore[attr-defined]
        return _same
    return None


Step = tuple[str, int, Any, Any]


@dataclass(frozen=True)
class Plan:
    """One serializer class's answer as steps, in its fields' order: (key, kind, how to read, how to
    convert)."""

    steps: tuple[Step, ...]
    has_methods: bool

    def represent(self, serializer: Any, instance: Any, known: Mapping[str, Any] | None) -> dict[str, Any]:
        """The dict DRF would build for ``instance``; raises _Fallback where it cannot say."""
        if isinstance(instance, Mapping):
            raise _Fallback  # DRF reads a mapping's keys, not its attributes
        out: dict[str, Any] = {}
        zone: Any = False  # the request's time zone, looked up once per object (DRF: once per field)
        for key, kind, read, convert in self.steps:
            if known is not None and key in known:
                out[key] = known[key]
                continue
            if kind == METHOD:
                out[key] = getattr(serializer, read)(instance)
                continue
            try:
                value = read(instance)
            except (AttributeError, KeyError, ObjectDoesNotExist):
                raise _Fallback from None  # DRF answers a default, None or nothing here
            if value is None:
                out[key] = None
            elif isinstance(value, _CALLED_BY_DRF):
                raise _Fallback  # DRF would call it
            elif kind == VALUE:
                out[key] = convert(value)
            elif kind == DATETIME:
                if zone is False:
                    zone = timezone.get_current_timezone() if settings.USE_TZ else None
                out[key] = _datetime(value, zone, convert)
            else:  # MANY: DRF's ListSerializer, a manager read through .all()
                items = value.all() if isinstance(value, BaseManager) else value
                out[key] = [convert.represent(None, item, None) for item in items]
        return out


def _datetime(value: Any, zone: Any, field: serializers.DateTimeField) -> Any:
    """DateTimeField.to_representation for an aware datetime in ISO 8601: the value in the request's
    zone, ``+00:00`` written ``Z``."""
    if isinstance(value, str):
        return value
    if zone is None or value.utcoffset() is None or api_settings.DATETIME_FORMAT.lower() != "iso-8601":
        raise _Fallback  # naive values, USE_TZ off or another output format: DRF's enforce_timezone
    try:
        text = value.astimezone(zone).isoformat()
    except OverflowError:
        raise _Fallback from None  # DRF fails the field with its own message
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _step(serializer_class: type, field: serializers.Field) -> Step | None:
    name = field.field_name
    if isinstance(field, serializers.SerializerMethodField):
        return (name, METHOD, field.method_name, None)
    attrs = list(field.source_attrs)
    if not attrs:  # source="*": the whole object
        return None
    if isinstance(field, serializers.ListSerializer):
        child = plan_for(type(field.child))
        if child is None or child.has_methods or len(attrs) != 1:
            return None
        return (name, MANY, attrgetter(attrs[0]), child)
    if type(field) is relations.PrimaryKeyRelatedField and field.pk_field is None and len(attrs) == 1:
        # DRF reads instance.serializable_value(name): the foreign key's column, not the related row.
        model = getattr(getattr(serializer_class, "Meta", None), "model", None)
        if model is None:
            return None
        return (name, VALUE, attrgetter(model._meta.get_field(attrs[0]).attname), _same)
    if not _plain_path(serializer_class, attrs):
        return None
    read = attrgetter(".".join(attrs))
    if type(field) is serializers.DateTimeField:
        if hasattr(field, "timezone") or getattr(field, "format", drf_fields.empty) is not drf_fields.empty:
            return None  # a field's own zone or format: DRF's path
        return (name, DATETIME, read, field)
    convert = _converter(field)
    return None if convert is None else (name, VALUE, read, convert)


def _plain_path(serializer_class: type, attrs: list[str]) -> bool:
    """Whether every step before the last of a dotted source is a forward foreign key of the model:
    then each holds a row (or None) and never a callable DRF would call, so attrgetter reads what
    DRF's get_attribute does."""
    model = getattr(getattr(serializer_class, "Meta", None), "model", None)
    for attr in attrs[:-1]:
        if model is None:
            return False
        try:
            relation = model._meta.get_field(attr)
        except FieldDoesNotExist:  # a property or a method, not a column
            return False
        if not (relation.many_to_one or relation.one_to_one) or not relation.concrete:
            return False
        model = relation.related_model
    return True


def _compile(serializer_class: type) -> Plan | None:
    prototype = serializer_class()
    steps: list[Step] = []
    for field in prototype.fields.values():
        if field.write_only:
            continue
        step = _step(serializer_class, field)
        if step is None:
            return None
        steps.append(step)
    return Plan(steps=tuple(steps), has_methods=any(step[1] == METHOD for step in steps))


_plans: dict[type, Plan | None] = {}
_lock = threading.RLock()  # a nested serializer's plan is built inside its parent's


def plan_for(serializer_class: type) -> Plan | None:
    """The class's plan (built on first use, once per process), or None when DRF must represent it."""
    try:
        return _plans[serializer_class]
    except KeyError:
        pass
    with _lock:
        if serializer_class not in _plans:
            _plans[serializer_class] = _compile(serializer_class)
        return _plans[serializer_class]


# Mixin for a serializer whose answer comes from its class's plan (DRF's when there is none). No
# docstring: drf-spectacular would publish it as each serializer's schema description.
class PlannedRepresentation:
    def to_representation(self, instance: Any) -> Any:
        plan = plan_for(type(self))
        if plan is not None:
            context: Mapping[str, Any] = self.context  # type: ignore[attr-defined]
            try:
                return plan.represent(self, instance, context.get(KNOWN_KEY))
            except _Fallback:
                pass
        return super().to_representation(instance)  # type: ignore[misc]

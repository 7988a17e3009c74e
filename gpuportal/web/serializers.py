"""Serializer helpers shared by the apps' APIs."""

from __future__ import annotations

import threading
from operator import attrgetter

from django.core.exceptions import ObjectDoesNotExist
from rest_framework import serializers
from rest_framework.fields import SkipField
from rest_framework.relations import PKOnlyObject


def _identity(instance):
    return instance


class CompiledRepresentationMixin:
    """``to_representation`` for read-only serializers of long lists, planned once per serializer.

    DRF walks every field of every row through its general machinery (a generator of readable fields, a
    source walk with a try and a callable check at each step); on the API job list that was a third of the
    request. Here each field is read by a getter built once (``operator.attrgetter`` over its source), and
    the field's own ``to_representation`` formats the value, so the output is the same — and the field stays
    the one declaration (schema, docs, output). Anything unusual (a related field, a source that is missing,
    raises or is callable) goes through DRF's own ``get_attribute``; tests/gpuportal/test_serializers.py
    compares both paths row for row.
    """

    def to_representation(self, instance):
        plan = self.__dict__.get("_representation_plan")
        if plan is None:
            plan = self._representation_plan = [_plan_field(field) for field in self._readable_fields]
        representation = {}
        for name, read, represent in plan:
            try:
                value = read(instance)
            except SkipField:
                continue
            representation[name] = None if value is None else represent(value)
        return representation


def _drf_representation(field: serializers.Field, instance):
    """What DRF's own ``Serializer.to_representation`` gives for one field."""
    attribute = field.get_attribute(instance)
    check_for_none = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
    return None if check_for_none is None else field.to_representation(attribute)


def _plan_field(field: serializers.Field):
    if not type(field).__module__.startswith("rest_framework.fields"):
        # Related fields, nested serializers and the project's own fields: DRF's path, unchanged.
        return field.field_name, lambda instance: _drf_representation(field, instance), _identity
    if field.source == "*":
        return field.field_name, _identity, field.to_representation
    fast = attrgetter(".".join(field.source_attrs))

    def read(instance):
        try:
            value = fast(instance)
        except (AttributeError, KeyError, ObjectDoesNotExist):
            return field.get_attribute(instance)  # DRF's own rules for defaults and missing objects
        return field.get_attribute(instance) if callable(value) else value

    return field.field_name, read, field.to_representation


_planned = threading.local()


def planned_rows(serializer_class: type[serializers.Serializer], instances, context: dict) -> list[dict]:
    """``serializer_class(instances, many=True, context=context).data``, by a serializer of that class built once
    per thread.

    DRF builds a model serializer's fields again for every instance of it (a deep copy of each declared field,
    then one per model column), which cost more than serialising the handful of rows a list draws afresh when the
    others are kept (``scheduling.api.rows``). The fields keep nothing of a call: what a call needs is in the
    context, which is this call's and is dropped afterwards (the fields read it through their parent)."""
    serializer = planned(serializer_class)
    serializer._context = context
    try:
        return [serializer.to_representation(instance) for instance in instances]
    finally:
        serializer._context = {}


def planned(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    """This thread's serializer of ``serializer_class``, its fields built once (``planned_rows``); its fields'
    ``to_representation`` format a value as the serializer's rows do."""
    kept = getattr(_planned, "serializers", None)
    if kept is None:
        kept = _planned.serializers = {}
    serializer = kept.get(serializer_class)
    if serializer is None:
        serializer = kept[serializer_class] = serializer_class()
    return serializer

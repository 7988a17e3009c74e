"""Audit filters, shared by the audit page, its CSV export and `GET /api/audit/`."""

import django_filters
from django.utils.translation import gettext_lazy as _

from .models import AuditAction, AuditRecord


class AuditFilterSet(django_filters.FilterSet):
    actor = django_filters.CharFilter(field_name="actor_name", label=_("Actor"))
    tenant = django_filters.CharFilter(field_name="tenant__name", label=_("Tenant"))
    # The record's own column: nothing for DISTINCT (django-filter's default for several values) to remove.
    action = django_filters.MultipleChoiceFilter(choices=AuditAction.choices, label=_("Action"), distinct=False)
    since = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="gte", label=_("From (ISO time)"))
    until = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="lt", label=_("Until (ISO time)"))

    class Meta:
        model = AuditRecord
        fields = ["actor", "tenant", "action", "since", "until"]

"""Job filters, shared by the job list page and `GET /api/jobs/`."""

import django_filters
from django import forms
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from scheduling.models import Job, JobStatus, TaskType


class TickBox(forms.CheckboxInput):
    """A checkbox that also reads the API's words: ``true``, ``1``, ``yes`` and ``on`` tick it; anything else
    (``false``, ``0``, absent) leaves it clear. A bare checkbox would read any text, even ``0``, as ticked."""

    def value_from_datadict(self, data, files, name):
        return str(data.get(name, "")).strip().lower() in ("true", "1", "yes", "on")


class JobFilterSet(django_filters.FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=JobStatus.choices, label=_("Status"))
    task_type = django_filters.ModelChoiceFilter(field_name="task_type", to_field_name="code",
                                                 queryset=TaskType.objects.all(), label=_("Task type"))
    gpu_model = django_filters.CharFilter(label=_("GPU model"))
    tenant = django_filters.CharFilter(field_name="tenant__name", label=_("Tenant"))
    project = django_filters.CharFilter(field_name="project__name", label=_("Project"))
    owner = django_filters.CharFilter(field_name="owner__username", label=_("Owner"))
    # A checkbox: the default select offered "Unknown / Yes / No", and its empty choice read "Only my jobs:
    # Unknown". The API's ``mine=true`` still reads as ticked.
    mine = django_filters.BooleanFilter(method="filter_mine", label=_("Only my jobs"), widget=TickBox)
    q = django_filters.CharFilter(method="filter_text", label=_("Search"))

    class Meta:
        model = Job
        fields = ["status", "task_type", "gpu_model", "tenant", "project", "owner"]

    def filter_mine(self, queryset, name, value):
        return queryset.filter(owner=self.request.user) if value and self.request else queryset

    def filter_text(self, queryset, name, value):
        query = Q(name__icontains=value) | Q(image__icontains=value)
        if value.lstrip("#").isdigit():
            query |= Q(pk=int(value.lstrip("#")))
        return queryset.filter(query)

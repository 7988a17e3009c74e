"""Job filters, shared by the job list page, `GET /api/jobs/` and `GET /api/jobs/export/`: what is chosen, the
order (``sort``) and, for the page and the export, the columns shown (``columns``, ``scheduling.jobs.columns``)."""

import django_filters
from django import forms
from django.db.models import Q
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from scheduling.jobs.columns import COLUMNS, ordering, sort_choices
from scheduling.models import Job, JobStatus, TaskType


class TickBox(forms.CheckboxInput):
    """A checkbox that also reads the API's words: ``true``, ``1``, ``yes`` and ``on`` tick it; anything else
    (``false``, ``0``, absent) leaves it clear. A bare checkbox would read any text, even ``0``, as ticked."""

    def value_from_datadict(self, data, files, name):
        return str(data.get(name, "")).strip().lower() in ("true", "1", "yes", "on")


class ColumnBoxes(forms.CheckboxSelectMultiple):
    """The page's column checkboxes, which also read the API's comma-separated ``columns=elapsed,start``."""

    def value_from_datadict(self, data, files, name):
        given = data.getlist(name) if hasattr(data, "getlist") else data.get(name)
        given = [given] if isinstance(given, str) else (given or [])
        return [part.strip() for value in given for part in str(value).split(",") if part.strip()]


def _choice_list() -> str:
    return ", ".join(COLUMNS)


class JobFilterSet(django_filters.FilterSet):
    # The job's own column: no join, so no duplicate for DISTINCT (django-filter's default for several values)
    # to remove, and with DISTINCT PostgreSQL refused an order by an expression with bound parameters.
    status = django_filters.MultipleChoiceFilter(choices=JobStatus.choices, label=_("Status"), distinct=False)
    task_type = django_filters.ModelChoiceFilter(field_name="task_type", to_field_name="code",
                                                 queryset=TaskType.objects.all(), label=_("Task type"),
                                                 empty_label=_("Any task type"))
    gpu_model = django_filters.CharFilter(label=_("GPU model"))
    tenant = django_filters.CharFilter(field_name="tenant__name", label=_("Tenant"))
    project = django_filters.CharFilter(field_name="project__name", label=_("Project"))
    owner = django_filters.CharFilter(field_name="owner__username", label=_("Owner"))
    # A checkbox: the default select offered "Unknown / Yes / No", and its empty choice read "Only my jobs:
    # Unknown". The API's ``mine=true`` still reads as ticked.
    mine = django_filters.BooleanFilter(method="filter_mine", label=_("Only my jobs"), widget=TickBox)
    q = django_filters.CharFilter(method="filter_text", label=_("Search"))
    sort = django_filters.ChoiceFilter(
        choices=sort_choices(), method="filter_sort", label=_("Sort by"), empty_label=_("Newest first"),
        error_messages={"invalid_choice": format_lazy(_(
            "Unknown order %(value)s: give a column for ascending or -column for descending, one of {choices}."),
            choices=_choice_list())})
    # Shapes the page and the export, not the jobs chosen: the list reads it from the form.
    columns = django_filters.MultipleChoiceFilter(
        choices=[(key, _(column.heading)) for key, column in COLUMNS.items()], method="filter_columns",
        label=_("Columns"), widget=ColumnBoxes, distinct=False,
        error_messages={"invalid_choice": format_lazy(_("Unknown column %(value)s: choose among {choices}."),
                                                      choices=_choice_list())})

    class Meta:
        model = Job
        fields = ["status", "task_type", "gpu_model", "tenant", "project", "owner"]

    def filter_mine(self, queryset, name, value):
        return queryset.filter(owner=self.request.user) if value and self.request else queryset

    def filter_sort(self, queryset, name, value):
        return queryset.order_by(*ordering(value))

    def filter_columns(self, queryset, name, value):
        return queryset

    def filter_text(self, queryset, name, value):
        query = Q(name__icontains=value) | Q(image__icontains=value)
        if value.lstrip("#").isdigit():
            query |= Q(pk=int(value.lstrip("#")))
        return queryset.filter(query)

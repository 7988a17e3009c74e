"""The job list as a person shaped it: which jobs (the filters), in which order (``sort``), with which columns
(``columns``), and the choice remembered for them (``accounts.preferences.job_list``).

One reading for the page, its live fragment and the export (``GET /api/jobs/export/``), so that each shows the
same jobs in the same order with the same columns. A request that names no columns and no order (the menu's
link, the export without them) gets the person's remembered choice; the page's form always sends its choice
(``shape``), which is then remembered when every value was understood.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from django.db.models import QuerySet
from django.http import QueryDict
from django.utils import timezone

from accounts.preferences.job_list import JobListChoice, job_list_choice, remember_job_list
from scheduling.jobs.columns import chosen, export_value, extras_of, ordering, read_fields
from scheduling.jobs.filtersets import ColumnBoxes, JobFilterSet
from scheduling.jobs.queries import table_rows

#: The page form's field saying that the request carries the person's choice of columns and order (no column
#: ticked then means the default columns, not "the remembered ones").
SHAPED = "shape"
#: Rows of an export read from the database at a time (the export streams: any number of rows).
EXPORT_CHUNK = 500


@dataclass(frozen=True)
class JobList:
    filterset: JobFilterSet
    jobs: QuerySet  # the jobs chosen, in the order asked for, reading what the columns show
    columns: tuple[str, ...]
    sort: str
    problems: dict[str, list[str]]  # each refused parameter and why (its value is then not applied)

    @property
    def export_query(self) -> str:
        """The export's query string for what is shown: the filters as given (empty ones left out, a ticked box
        as ``true``), the columns and the order made explicit."""
        query = QueryDict(mutable=True)
        for name, field in self.filterset.form.fields.items():
            if name in ("columns", "sort") or name in self.problems:
                continue
            values = [v for v in self.filterset.form.data.getlist(name) if v] if self.filterset.is_bound else []
            if values and name == "mine":
                values = ["true"] if field.widget.value_from_datadict(self.filterset.form.data, {}, name) else []
            if values:
                query.setlist(name, values)
        query["columns"] = ",".join(self.columns)
        if self.sort:
            query["sort"] = self.sort
        return query.urlencode()


def job_list(request, queryset: QuerySet, remember: bool = False) -> JobList:
    """``queryset`` (the jobs the reader may list) as ``request``'s query string shapes it; without columns and
    order, as the reader last chose. ``remember``: keep a choice the page's form sent, when it was understood."""
    known = job_list_choice(request.user)
    data = request.GET.copy()
    shaped = SHAPED in data
    if not shaped:
        if "columns" not in data and known.columns:
            data.setlist("columns", list(known.columns))
        if "sort" not in data and known.sort:
            data["sort"] = known.sort
    data.pop(SHAPED, None)
    data.pop("page", None)
    filterset = JobFilterSet(data or None, queryset=queryset, request=request)
    jobs = filterset.qs  # validates: a refused value is left out and named in the form's errors
    cleaned = getattr(filterset.form, "cleaned_data", {})
    columns, sort = chosen(cleaned.get("columns") or ()), cleaned.get("sort") or ""
    problems = {name: [str(e) for e in errors] for name, errors in filterset.form.errors.items()}
    if remember and shaped and not problems:
        remember_job_list(request.user, JobListChoice(columns if cleaned.get("columns") else (), sort), known)
    return JobList(filterset, table_rows(jobs, read_fields(columns)), columns, sort, problems)


def export_shape(user, params) -> tuple[tuple[str, ...], str]:
    """The columns and order of an export: those of ``params`` (already validated by the filters), else the
    person's remembered ones."""
    known = job_list_choice(user)
    given = ColumnBoxes().value_from_datadict(params, {}, "columns")
    return chosen(given or known.columns), params.get("sort") or known.sort


def ordered(jobs: QuerySet, sort: str) -> QuerySet:
    return jobs.order_by(*ordering(sort))


def export_rows(jobs: QuerySet, columns: tuple[str, ...]) -> Iterator[list]:
    """Each job's id and the values of ``columns`` (``columns.export_value``), read a chunk at a time: the nodes
    and utilisation of a chunk in one query each."""
    now = timezone.now()
    chunk: list = []
    for job in table_rows(jobs, read_fields(columns)).iterator(chunk_size=EXPORT_CHUNK):
        chunk.append(job)
        if len(chunk) == EXPORT_CHUNK:
            yield from _chunk_rows(chunk, columns, now)
            chunk = []
    yield from _chunk_rows(chunk, columns, now)


def _chunk_rows(jobs: list, columns: tuple[str, ...], now) -> Iterator[list]:
    extras = extras_of([job.pk for job in jobs], columns)
    for job in jobs:
        yield [job.pk, *(export_value(key, job, extras, now) for key in columns)]

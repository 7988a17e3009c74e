"""The job table of the dashboard and the job list, drawn in Python.

The same rows through the template engine took half a millisecond each (a URL, a block translation, two
dates and a reason per row), the largest part of the dashboard and the job list under load (bench_portal).
Same markup, same translated strings; every value is escaped with the standard library's ``html.escape``
(what Django's ``escape`` calls) without the lazy-string wrappers that cost more than the text.

Each row is kept in the cache under a key made of everything it shows (``_row_key``: the job's shown columns
and queue state, the reader's language and time zone, the day), so it stays right without being told of
changes: a job that moves gets a new key and only its row is drawn again, while the page cache, which any
change anywhere empties, misses all the time on a busy cluster. The one value that follows the clock, the
submission's "12 min ago", is filled in at each read. The key is the content, so a per-process cache (the
embedded demo) is as right as the shared one.
"""

import hashlib
from html import escape
from types import SimpleNamespace

from django import template
from django.core.cache import cache
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.timezone import get_current_timezone_name, localdate, template_localtime
from django.utils.translation import get_language, gettext

from gpuportal.templatetags.portal import job_status
from gpuportal.text.formatting import duration_text, relative_time
from scheduling.jobs.columns import (
    COLUMNS,
    DEFAULT_COLUMNS,
    NO_EXTRAS,
    elapsed_seconds,
    extras_of,
    read_fields,
    wait_seconds,
)
from scheduling.jobs.queries import shown_values, table_rows
from scheduling.models import WAITING_STATUSES, FailureCategory, TaskType, label_of, queue_places

register = template.Library()

def _when(moment, pattern: str) -> str:
    """``moment`` in the reader's time zone (strftime: the date filter's parser cost more than the row)."""
    return template_localtime(moment).strftime(pattern)


def _position(job) -> str:
    if not job.queue_position:
        return "—"
    text = escape(gettext("%(p)s (tenant: %(t)s)") % {"p": job.queue_position, "t": job.tenant_queue_position})
    if job.likely_start:
        when = job.likely_start  # in the reader's zone, which it names when it is a time
        if job.estimated_start is not None:
            when = f"{when} {template_localtime(job.estimated_start).strftime('%Z')}"
        starts = gettext("starts %(when)s") % {"when": when}
        text += f'<div class="muted">{escape(starts)}</div>'
    return text


def _reason(job) -> str:
    if job.wait_reason:  # the translated label; the code (what the API says) in its tooltip
        return (f'<strong title="{escape(job.wait_reason)}">{escape(job.get_wait_reason_display())}</strong>: '
                f"{escape(job.wait_reason_message)}")
    if job.failure_category:
        return f'<span title="{escape(job.failure_category)}">{escape(job.get_failure_category_display())}</span>'

    if job.status == "pending":
        return escape(gettext("Waiting for an approver."))
    return ""


#: How long a drawn row is kept; a row whose job changes is never read again (its key changes with it).
ROW_SECONDS = 600


def _row_key(shown: tuple, reader: str) -> str:
    """A row's cache key: ``shown``, the columns drawn and the values of everything ``_row`` shows of a job
    (``columns.read_fields``, its place in the queue table while it waits, with the nodes and utilisation of
    ``columns.extras_of`` when shown), and ``reader`` (language, time zone and day)."""
    return "job-row:" + hashlib.sha256(repr((shown, reader)).encode()).hexdigest()[:40]


def _rows(jobs, labels: list[str], columns: tuple[str, ...] = DEFAULT_COLUMNS) -> str:
    """The rows, each from the cache when its job, the columns shown and the reader are unchanged, else drawn
    and kept.

    The keys come from the shown values read as plain tuples (``values_list``): building the jobs and their
    related rows as model instances cost more than the table itself when every row is read back. Only the
    jobs whose rows are missing are read as instances, to be drawn, and each drawn row is kept under what its
    instance shows (a job may have moved between the two reads). What follows the clock (``_LIVE``) is filled in
    at each read."""
    fields = read_fields(columns)
    shown = list(jobs.values_list(*fields))
    extras = extras_of([values[0] for values in shown], columns)
    places, status = queue_places(), fields.index("status")
    reader = f"{get_language()}|{get_current_timezone_name()}|{localdate().isoformat()}"
    keys = [_row_key((columns, values, places.get(values[0]) if values[status] in WAITING_STATUSES else None,
                      extras.of(values[0])), reader) for values in shown]
    kept = cache.get_many(keys) if keys else {}
    missing = {values[0] for key, values in zip(keys, shown, strict=True) if key not in kept}
    drawn = {}
    if missing:
        url_of = _job_url()
        fresh = {job.pk: job for job in table_rows(jobs.model.objects.filter(pk__in=missing), fields)}
        drawn = {job.pk: (_row_key((columns, shown_values(job, fields), job._queue_place(), extras.of(job.pk)), reader),
                          _row(job, url_of(job.pk), labels, columns, extras))
                 for job in (fresh[values[0]] for values in shown if values[0] in fresh)}
        cache.set_many(dict(drawn.values()), ROW_SECONDS)
    rows = []
    for key, values in zip(keys, shown, strict=True):
        parts = kept[key] if key in kept else drawn[values[0]][1] if values[0] in drawn else None
        if parts is not None:  # a job deleted between the two reads has no row
            now = SimpleNamespace(**dict(zip(fields, values, strict=True)))
            rows.append("".join(part if i % 2 == 0 else _LIVE[part](now) for i, part in enumerate(parts)))
    return "\n".join(rows)


def _time_cell(moment) -> str:
    if moment is None:
        return "—"
    return f'<time datetime="{moment.isoformat()}">{escape(_when(moment, "%Y-%m-%d %H:%M %Z"))}</time>'


def _seconds_text(seconds) -> str:
    return "—" if seconds is None else escape(duration_text(seconds))


#: What follows the clock, from the values a row read (``_rows``): the submission's "12 min ago", how long a
#: running job has run and how long a waiting one has waited.
_LIVE = {
    "submitted": lambda row: escape(relative_time(row.submitted_at)),
    "elapsed": lambda row: _seconds_text(elapsed_seconds(row)),
    "wait": lambda row: _seconds_text(wait_seconds(row)),
}

#: Each column's cell (``scheduling.jobs.columns.COLUMNS``): its markup, or, for a cell that follows the clock,
#: the markup before and after what ``_LIVE`` fills in.
_CELLS = {
    "name": lambda job, url, extras: (f'<a href="{url}">{escape(job.name)}</a>'
                                      f'<div class="muted">{escape(job.owner.username)}</div>'),
    "project": lambda job, url, extras: f"{escape(job.tenant.name)} / {escape(job.project.name)}",
    "task_type": lambda job, url, extras: escape(job.task_type.code),
    "gpus": lambda job, url, extras: f"{job.node_count} × {job.gpus_per_node} {escape(job.gpu_model)}",
    "model": lambda job, url, extras: escape(job.gpu_model),
    "status": lambda job, url, extras: job_status(job),
    "position": lambda job, url, extras: _position(job),
    "reason": lambda job, url, extras: _reason(job),
    "submitted": lambda job, url, extras: ('<time title="', f'">'
                                           f'{escape(_when(job.submitted_at, "%Y-%m-%d %H:%M %Z"))}</time>'),
    "start": lambda job, url, extras: _time_cell(job.started_at),
    "end": lambda job, url, extras: _time_cell(job.finished_at),
    "elapsed": lambda job, url, extras: ("", ""),
    "wait": lambda job, url, extras: ("", ""),
    "exit_code": lambda job, url, extras: "—" if job.exit_code is None else str(job.exit_code),
    "node": lambda job, url, extras: escape(", ".join(extras.nodes.get(job.pk, ()))) or "—",
    "efficiency": lambda job, url, extras: _utilization(extras.utilization.get(job.pk)),
}


def _utilization(mean) -> str:
    return "—" if mean is None else escape(gettext("%(pct)s %% mean") % {"pct": f"{mean:.0f}"})


def _job_url():
    """A function from a job's id to its page's address, escaped: one ``reverse`` a table, not one a row (it was
    a third of drawing a row)."""
    marker = "987654321"
    before, _marker, after = escape(reverse("scheduling:job-detail", args=[marker])).rpartition(marker)
    return lambda pk: f"{before}{pk}{after}"


def _row(job, url: str, labels: list[str], columns: tuple[str, ...] = DEFAULT_COLUMNS,
         extras=NO_EXTRAS) -> tuple[str, ...]:
    """One job's row, in parts: the markup, with the names of the cells that follow the clock (``_LIVE``, filled
    in at each read) between them, at the odd places. Each cell carries its column's heading (``data-label``): on
    a phone the rows are drawn as cards, each cell under its heading, so that status, reason and likely start need
    no sideways scroll. ``url``: the job page's address, escaped (``_job_url``)."""
    parts: list[str] = []
    current = f'<tr data-job-id="{job.pk}"><td class="id" data-label="{labels[0]}"><a href="{url}">{job.pk}</a></td>'
    for key, label in zip(columns, labels[1:], strict=True):
        opening = f'<td class="{COLUMNS[key].css}" data-label="{label}">'
        cell = _CELLS[key](job, url, extras)
        if isinstance(cell, tuple):
            parts += [current + opening + cell[0], key]
            current = cell[1] + "</td>"
        else:
            current += f"{opening}{cell}</td>"
    return (*parts, current + "</tr>")


@register.simple_tag
def job_table(jobs, empty_text: str, columns: tuple[str, ...] = DEFAULT_COLUMNS):
    """A table of ``jobs`` (a queryset, in its order; one row each, linking to the job) showing ``columns``
    (``scheduling.jobs.columns``: the job list's choice; the dashboard's are the default), or ``empty_text`` in
    its one row. Times carry the year and the reader's time zone."""
    headings = ["#", *(gettext(COLUMNS[key].heading) for key in columns)]
    head = format_html_join("", '<th scope="col">{}</th>', ((heading,) for heading in headings))
    labels = [escape(heading) for heading in headings]
    rows = mark_safe(_rows(jobs, labels, tuple(columns)))  # noqa: S308 — every value is escaped in _row
    if not rows:
        rows = format_html('<tr><td colspan="{}" class="empty">{}</td></tr>', len(headings), empty_text)
    return format_html('<div class="table-wrap"><table class="jobs">\n  <thead><tr>{}</tr></thead>\n  <tbody>\n{}\n'
                       '  </tbody>\n</table></div>', head, rows)  # the wrapper scrolls it sideways on a phone


#: How long a drawn filter form is kept; its key is everything it shows, so it is never stale.
FILTERS_SECONDS = 600


@register.simple_tag
def job_filters(form):
    """The job filter form's fields (``JobFilterSet``), each in its ``div``, as the job list's template drew them.

    Kept in the cache under what they show: the values asked for, the task types offered and the reader's
    language (the rest of the form is fixed). Drawing eight fields through the widget templates cost a fifth
    of the job list's time; the key costs one small query."""
    offered = list(TaskType.objects.values_list("code", "name"))
    asked = [(name, form.data.getlist(name) if hasattr(form.data, "getlist") else form.data.get(name))
             for name in form.fields]
    key = "job-filters:" + hashlib.sha256(repr((form.is_bound, asked, offered, get_language())).encode()) \
        .hexdigest()[:40]
    drawn = cache.get(key)
    if drawn is None:
        drawn = "".join(_filter_field(field) for field in form)
        cache.set(key, drawn, FILTERS_SECONDS)
    return mark_safe(drawn)  # noqa: S308 — drawn by format_html


def _filter_field(field) -> str:
    """One filter: its label and control; a group of checkboxes (the columns) in a fieldset under its legend."""
    errors = format_html_join("", '<span class="error">{}</span>', ((e,) for e in field.errors))
    if field.use_fieldset:
        return format_html('\n    <fieldset class="filter filter-{}"><legend>{}</legend>{}{}</fieldset>\n  ',
                           field.name, field.label, field, errors)
    return format_html('\n    <div class="filter">{} {}{}</div>\n  ', field.label_tag(), field, errors)


@register.filter
def failure_label(code: str) -> str:
    """A failure category's label in the reader's language (the code itself when unknown)."""
    return label_of(FailureCategory, code)

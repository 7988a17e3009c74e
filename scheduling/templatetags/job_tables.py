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

from django import template
from django.core.cache import cache
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.timezone import get_current_timezone_name, localdate, template_localtime
from django.utils.translation import get_language, gettext, gettext_noop

from gpuportal.templatetags.portal import job_status
from gpuportal.text.formatting import relative_time
from scheduling.jobs.queries import TABLE_COLUMNS, table_rows
from scheduling.models import FailureCategory, TaskType, label_of

register = template.Library()

_HEADINGS = (gettext_noop("Name"), gettext_noop("Tenant / project"), gettext_noop("Task type"), gettext_noop("GPUs"),
             gettext_noop("Status"), gettext_noop("Queue position"), gettext_noop("Why / result"),
             gettext_noop("Submitted"))


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
#: Where the submission time is among ``TABLE_COLUMNS``.
SUBMITTED = TABLE_COLUMNS.index("submitted_at")


def _row_key(shown: tuple, reader: str) -> str:
    """A row's cache key: ``shown``, the values of everything ``_row`` shows of a job (``TABLE_COLUMNS``), and
    ``reader`` (language, time zone and day)."""
    return "job-row:" + hashlib.sha256(repr((shown, reader)).encode()).hexdigest()[:40]


def _shown(job) -> tuple:
    """``TABLE_COLUMNS`` of a job built as an instance, as ``values_list`` reads them (None without a queue state)."""
    values = []
    for column in TABLE_COLUMNS:
        value = job
        for name in column.split("__"):
            value = getattr(value, name, None)
        values.append(value)
    return tuple(values)


def _rows(jobs, labels: list[str]) -> str:
    """The rows, each from the cache when its job and reader are unchanged, else drawn and kept.

    The keys come from the shown columns read as plain tuples (``values_list``): building the jobs and their
    related rows as model instances cost more than the table itself when every row is read back. Only the
    jobs whose rows are missing are read as instances, to be drawn, and each drawn row is kept under what its
    instance shows (a job may have moved between the two reads)."""
    shown = list(jobs.values_list(*TABLE_COLUMNS))
    reader = f"{get_language()}|{get_current_timezone_name()}|{localdate().isoformat()}"
    keys = [_row_key(values, reader) for values in shown]
    kept = cache.get_many(keys) if keys else {}
    missing = {values[0] for key, values in zip(keys, shown, strict=True) if key not in kept}
    drawn = {}
    if missing:
        fresh = {job.pk: job for job in table_rows(jobs.model.objects.filter(pk__in=missing))}
        drawn = {job.pk: (_row_key(_shown(job), reader), _row(job, labels))
                 for job in (fresh[values[0]] for values in shown if values[0] in fresh)}
        cache.set_many(dict(drawn.values()), ROW_SECONDS)
    rows = []
    for key, values in zip(keys, shown, strict=True):
        parts = kept[key] if key in kept else drawn[values[0]][1] if values[0] in drawn else None
        if parts is not None:  # a job deleted between the two reads has no row
            head, tail = parts
            rows.append(f"{head}{escape(relative_time(values[SUBMITTED]))}{tail}")
    return "\n".join(rows)


def _row(job, labels: list[str]) -> tuple[str, str]:
    """One job's row, in two parts around the submission's relative time (which follows the clock, so it is
    filled in at each read). Each cell carries its column's heading (``data-label``): on a phone the rows are
    drawn as cards, each cell under its heading, so that status, reason and likely start need no sideways
    scroll."""
    url = escape(reverse("scheduling:job-detail", args=[job.pk]))
    n, name, where, task, gpus, status, position, reason, submitted = labels
    return (f'<tr data-job-id="{job.pk}"><td class="id" data-label="{n}"><a href="{url}">{job.pk}</a></td>'
            f'<td class="name" data-label="{name}"><a href="{url}">{escape(job.name)}</a>'
            f'<div class="muted">{escape(job.owner.username)}</div></td>'
            f'<td class="where" data-label="{where}">{escape(job.tenant.name)} / {escape(job.project.name)}</td>'
            f'<td class="task" data-label="{task}">{escape(job.task_type.code)}</td>'
            f'<td class="gpus" data-label="{gpus}">{job.node_count} × {job.gpus_per_node} {escape(job.gpu_model)}'
            f'</td><td class="state" data-label="{status}">{job_status(job)}</td>'
            f'<td class="position" data-label="{position}">{_position(job)}</td>'
            f'<td class="reason" data-label="{reason}">{_reason(job)}</td>'
            f'<td class="submitted" data-label="{submitted}"><time title="', f'">'
            f'{escape(_when(job.submitted_at, "%Y-%m-%d %H:%M %Z"))}</time></td></tr>')


@register.simple_tag
def job_table(jobs, empty_text: str):
    """A table of ``jobs`` (a queryset; one row each, linking to the job), or ``empty_text`` in its one row.
    Times carry the year and the reader's time zone."""
    headings = ["#", *(gettext(heading) for heading in _HEADINGS)]
    head = format_html_join("", "<th>{}</th>", ((heading,) for heading in headings))
    labels = [escape(heading) for heading in headings]
    rows = mark_safe(_rows(jobs, labels))  # noqa: S308 — every value is escaped in _row
    if not rows:
        rows = format_html('<tr><td colspan="9" class="empty">{}</td></tr>', empty_text)
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
        drawn = "".join(format_html('\n    <div class="filter">{} {}{}</div>\n  ', field.label_tag(), field,
                                    format_html_join("", '<span class="error">{}</span>', ((e,) for e in field.errors)))
                        for field in form)
        cache.set(key, drawn, FILTERS_SECONDS)
    return mark_safe(drawn)  # noqa: S308 — drawn by format_html


@register.filter
def failure_label(code: str) -> str:
    """A failure category's label in the reader's language (the code itself when unknown)."""
    return label_of(FailureCategory, code)

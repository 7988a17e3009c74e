"""The job table of the dashboard and the job list, drawn in Python.

The same rows through the template engine took half a millisecond each (a URL, a block translation, two
dates and a reason per row), the largest part of the dashboard and the job list under load (bench_portal).
Same markup, same translated strings; every value is escaped with the standard library's ``html.escape``
(what Django's ``escape`` calls) without the lazy-string wrappers that cost more than the text.
"""

from html import escape

from django import template
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.timezone import template_localtime
from django.utils.translation import gettext, gettext_noop

from gpuportal.templatetags.portal import job_status
from gpuportal.text.formatting import relative_time
from scheduling.models import FailureCategory, label_of

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


def _row(job, labels: list[str]) -> str:
    """One job's row. Each cell carries its column's heading (``data-label``): on a phone the rows are drawn
    as cards, each cell under its heading, so that status, reason and likely start need no sideways scroll."""
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
            f'<td class="submitted" data-label="{submitted}"><time title="{escape(relative_time(job.submitted_at))}">'
            f'{escape(_when(job.submitted_at, "%Y-%m-%d %H:%M %Z"))}</time></td></tr>')


@register.simple_tag
def job_table(jobs, empty_text: str):
    """A table of jobs (one row each, linking to the job), or ``empty_text`` in its one row. Times carry the
    year and the reader's time zone."""
    headings = ["#", *(gettext(heading) for heading in _HEADINGS)]
    head = format_html_join("", "<th>{}</th>", ((heading,) for heading in headings))
    labels = [escape(heading) for heading in headings]
    rows = mark_safe("\n".join(_row(job, labels) for job in jobs))  # noqa: S308 — every value is escaped in _row
    if not rows:
        rows = format_html('<tr><td colspan="9" class="empty">{}</td></tr>', empty_text)
    return format_html('<div class="table-wrap"><table class="jobs">\n  <thead><tr>{}</tr></thead>\n  <tbody>\n{}\n'
                       '  </tbody>\n</table></div>', head, rows)  # the wrapper scrolls it sideways on a phone


@register.filter
def failure_label(code: str) -> str:
    """A failure category's label in the reader's language (the code itself when unknown)."""
    return label_of(FailureCategory, code)

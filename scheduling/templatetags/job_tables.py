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
        starts = gettext("starts %(when)s") % {"when": job.likely_start}
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


def _row(job) -> str:
    url = escape(reverse("scheduling:job-detail", args=[job.pk]))
    return (f'<tr data-job-id="{job.pk}"><td><a href="{url}">{job.pk}</a></td>'
            f'<td><a href="{url}">{escape(job.name)}</a><div class="muted">{escape(job.owner.username)}</div></td>'
            f"<td>{escape(job.tenant.name)} / {escape(job.project.name)}</td><td>{escape(job.task_type.code)}</td>"
            f"<td>{job.node_count} × {job.gpus_per_node} {escape(job.gpu_model)}</td><td>{job_status(job)}</td>"
            f'<td class="position">{_position(job)}</td><td class="reason">{_reason(job)}</td>'
            f'<td><time title="{escape(relative_time(job.submitted_at))}">'
            f'{_when(job.submitted_at, "%Y-%m-%d %H:%M")}</time></td></tr>')


@register.simple_tag
def job_table(jobs, empty_text: str):
    """A table of jobs (one row each, linking to the job), or ``empty_text`` in its one row."""
    head = format_html_join("", "<th>{}</th>", (("#",), *((gettext(heading),) for heading in _HEADINGS)))
    rows = mark_safe("\n".join(_row(job) for job in jobs))  # noqa: S308 — every value is escaped in _row
    if not rows:
        rows = format_html('<tr><td colspan="9" class="empty">{}</td></tr>', empty_text)
    return format_html('<div class="table-wrap"><table class="jobs">\n  <thead><tr>{}</tr></thead>\n  <tbody>\n{}\n'
                       '  </tbody>\n</table></div>', head, rows)  # the wrapper scrolls it sideways on a phone


@register.filter
def failure_label(code: str) -> str:
    """A failure category's label in the reader's language (the code itself when unknown)."""
    return label_of(FailureCategory, code)

"""The job table of the dashboard and the job list, drawn in Python.

The same rows through the template engine took half a millisecond each (a URL, a block translation, two
dates and a reason per row), the largest part of the dashboard and the job list under load (bench_portal).
Same markup, same translated strings.
"""

from django import template
from django.template.defaultfilters import date as format_date
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.timezone import template_localtime
from django.utils.translation import gettext, gettext_noop

from gpuportal.templatetags.portal import job_status

register = template.Library()

_HEADINGS = (gettext_noop("Name"), gettext_noop("Tenant / project"), gettext_noop("Task type"), gettext_noop("GPUs"),
             gettext_noop("Status"), gettext_noop("Queue position"), gettext_noop("Why / result"),
             gettext_noop("Submitted"))


def _position(job) -> str:
    if not job.queue_position:
        return "—"
    text = format_html("{}", gettext("%(p)s (tenant: %(t)s)") % {"p": job.queue_position,
                                                                "t": job.tenant_queue_position})
    if job.estimated_start:
        text += format_html('<div class="muted">{} ≈ {}</div>', gettext("starts"),
                            format_date(template_localtime(job.estimated_start), "m-d H:i"))
    return text


def _reason(job) -> str:
    if job.wait_reason:
        return format_html("<code>{}</code> {}", job.wait_reason, job.wait_reason_message)
    if job.failure_category:
        return format_html("<code>{}</code> {}", job.failure_category, job.get_failure_category_display())
    if job.status == "pending":
        return gettext("Waiting for an approver.")
    return ""


def _row(job):
    url = reverse("scheduling:job-detail", args=[job.pk])
    return format_html(
        '<tr data-job-id="{}"><td><a href="{}">{}</a></td><td><a href="{}">{}</a><div class="muted">{}</div></td>'
        "<td>{} / {}</td><td>{}</td><td>{} × {} {}</td><td>{}</td><td class=\"position\">{}</td>"
        '<td class="reason">{}</td><td>{}</td></tr>',
        job.pk, url, job.pk, url, job.name, job.owner.username, job.tenant.name, job.project.name,
        job.task_type.code, job.node_count, job.gpus_per_node, job.gpu_model, job_status(job), _position(job),
        _reason(job), format_date(template_localtime(job.submitted_at), "Y-m-d H:i"))


@register.simple_tag
def job_table(jobs, empty_text: str):
    """A table of jobs (one row each, linking to the job), or ``empty_text`` in its one row."""
    head = format_html_join("", "<th>{}</th>", (("#",), *((gettext(heading),) for heading in _HEADINGS)))
    rows = format_html_join("\n", "{}", ((_row(job),) for job in jobs))
    if not rows:
        rows = format_html('<tr><td colspan="9" class="empty">{}</td></tr>', empty_text)
    return format_html('<table class="jobs">\n  <thead><tr>{}</tr></thead>\n  <tbody>\n{}\n  </tbody>\n</table>',
                       head, rows)

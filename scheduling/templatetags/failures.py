"""The failure of a job as its page shows it (``scheduling.executors.failures``): ``{{ job|failure }}``."""

from django import template

from scheduling.executors.failures import FailureView, failure_of

register = template.Library()


@register.filter
def failure(job) -> FailureView | None:
    return failure_of(job)

"""The data table under each chart of the report pages, drawn in Python.

A dashboard has thousands of cells (a row per day and GPU model or tenant, for each chart); through template
loops they took most of the page's rendering time. Same markup: every value localised as the template engine
would (``localize``) and escaped, an em dash for no value.
"""

from html import escape

from django import template
from django.utils.formats import localize
from django.utils.safestring import mark_safe

register = template.Library()


def _cell(value) -> str:
    if value is None:
        return '<td class="nums">—</td>'
    return f'<td class="nums">{escape(value if isinstance(value, str) else str(localize(value)))}</td>'


@register.simple_tag
def data_table(section):
    """``section``'s columns and rows (``metering.presentation.Section``) as a table."""
    head = "".join(f"<th>{escape(str(label or key))}</th>" for key, label in section.columns)
    body = "".join(f"<tr>{''.join(_cell(value) for value in row)}</tr>" for row in section.table())
    return mark_safe(f'<table class="data-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')  # noqa: S308

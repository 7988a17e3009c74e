"""The data table under each chart of the report pages, drawn in Python.

A dashboard has thousands of cells (a row per day and GPU model or tenant, for each chart); through template
loops they took most of the page's rendering time. Same markup: every value localised as the template engine
would (``localize``), figures with their thousands grouped, escaped, an em dash for no value.
"""

from html import escape

from django import template
from django.utils.formats import localize
from django.utils.safestring import mark_safe

from gpuportal.text.formatting import figure_text

register = template.Library()


#: Columns that hold identifiers, shown as they are typed (no thousands separators).
IDENTIFIERS = frozenset({"job_id", "id", "year"})


def _cell(value, grouped: bool) -> str:
    if value is None:
        return '<td class="nums">—</td>'
    if isinstance(value, str):
        return f'<td class="nums">{escape(value)}</td>'
    return f'<td class="nums">{escape(figure_text(value) if grouped else str(localize(value)))}</td>'


@register.simple_tag
def data_table(section):
    """``section``'s columns and rows (``metering.reports.presentation.Section``) as a table."""
    head = "".join(f"<th>{escape(str(label or key))}</th>" for key, label in section.columns)
    grouped = [key not in IDENTIFIERS for key, _label in section.columns]
    body = "".join(f"<tr>{''.join(_cell(value, group) for value, group in zip(row, grouped, strict=True))}</tr>"
                   for row in section.table())
    return mark_safe(f'<table class="data-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')  # noqa: S308

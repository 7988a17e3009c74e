"""CSV exports that a spreadsheet cannot turn into formulas: the one writer every CSV download uses.

Why: a job name, an audit reason or a project name is typed by users; a cell starting with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return is run as a formula by Excel or LibreOffice when the file is opened
(OWASP "CSV injection"). Such cells get a leading single quote, which spreadsheets show as text.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from decimal import Decimal

from django.core.serializers.json import DjangoJSONEncoder

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value):
    """``value`` unchanged unless it is text a spreadsheet would read as a formula; then quoted with ``'``.

    Numbers stay numbers (``-3`` as an int is a value, not a formula), so figures keep their type."""
    if value is None or isinstance(value, int | float | Decimal):
        return value
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def safe_row(row: Iterable) -> list:
    return [safe_cell(value) for value in row]


class _Echo:
    """A file that hands back what is written, for streaming a CSV row by row."""

    def write(self, value):
        return value


def csv_text(header: Iterable, rows: Iterable[Iterable]) -> str:
    """The whole CSV (header and rows) as one string, every cell made safe."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(safe_row(header))
    writer.writerows(safe_row(row) for row in rows)
    return buffer.getvalue()


def csv_lines(header: Iterable, rows: Iterable[Iterable]):
    """The CSV one line at a time (for a streaming response), every cell made safe."""
    writer = csv.writer(_Echo())
    yield writer.writerow(safe_row(header))
    for row in rows:
        yield writer.writerow(safe_row(row))


def json_object_lines(header: list, rows: Iterable[Iterable]):
    """``{"columns": header, "jobs": [{column: value, …}, …]}`` a piece at a time (for a streaming response, the
    JSON counterpart of ``csv_lines``): moments and decimals as ``DjangoJSONEncoder`` writes them."""
    encoder = DjangoJSONEncoder()
    yield '{"columns": ' + encoder.encode(list(header)) + ', "jobs": ['
    for number, row in enumerate(rows):
        yield ("," if number else "") + "\n" + encoder.encode(dict(zip(header, row, strict=True)))
    yield "\n]}\n"

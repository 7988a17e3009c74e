"""Readable values: durations, relative moments and grouped figures."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.utils import translation

from gpuportal.text.formatting import duration_text, figure_text, list_text, relative_time

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_durations_read_as_hours_and_minutes():
    assert duration_text(21600) == "6 h 0 min"
    assert duration_text(46) == "46 s"
    assert duration_text(12 * 60) == "12 min"
    assert duration_text(3 * 86400 + 7200 + 59) == "3 d 2 h"


def test_moments_read_relative_to_now():
    assert relative_time(NOW + timedelta(hours=2, minutes=5), NOW) == "in 2 h 5 min"
    assert relative_time(NOW - timedelta(minutes=12), NOW) == "12 min ago"
    assert relative_time(NOW + timedelta(seconds=20), NOW) == "just now"
    assert relative_time(None, NOW) == ""


def test_figures_have_their_thousands_grouped_and_nothing_else_changes():
    assert figure_text(1234567) == "1,234,567"
    assert figure_text(12345.5) == "12,345.5"
    assert figure_text(Decimal("9876.25")) == "9,876.25"
    assert figure_text(999) == "999"
    assert figure_text(None) == "—" and figure_text("H100") == "H100" and figure_text(True) == "True"


def test_lists_are_joined_the_readers_way():
    assert list_text(["speech", "vision"]) == "speech, vision"
    assert list_text(["a, b", "c"], clauses=True) == "a, b; c"
    with translation.override("zh-hans"):
        assert list_text(["speech", "vision"]) == "speech、vision"
        assert list_text(["甲", "乙"], clauses=True) == "甲；乙"
    assert list_text([]) == ""


def test_chinese_figures_are_grouped_by_thousands_too():
    from django.utils.formats import date_format

    with translation.override("zh-hans"):
        assert figure_text(1234567.5) == "1,234,567.5" and figure_text(12345) == "12,345"
        assert date_format(date(2026, 11, 1), "MONTH_DAY_FORMAT") == "11月1日"  # the calendar's day, not "Nov 1"

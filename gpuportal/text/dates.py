"""Days and months in the portal's time zone (reports, rollups, calendars)."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django.utils import timezone


def day_start(day: date) -> datetime:
    """Local midnight at the start of ``day``."""
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_default_timezone())


def local_day(moment: datetime) -> date:
    return timezone.localtime(moment, timezone.get_default_timezone()).date()


def month_start(day: date) -> date:
    return day.replace(day=1)


def next_month(month: date) -> date:
    return (month.replace(day=28) + timedelta(days=4)).replace(day=1)

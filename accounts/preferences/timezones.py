"""Each person's time zone: kept in their preference, carried in their session, activated per request.

The session carries it so that showing a page costs no query: it is copied there when the person signs in
and when they change it (``set_time_zone``). ``TimeZoneMiddleware`` activates it; an unknown or empty name
falls back to the site's ``TIME_ZONE``.
"""

from __future__ import annotations

import zoneinfo
from functools import cache

from django.contrib.auth.signals import user_logged_in
from django.core.exceptions import ValidationError
from django.dispatch import receiver
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts.models import Preference

SESSION_KEY = "gpuportal_time_zone"


@cache
def time_zone_names() -> tuple[str, ...]:
    return tuple(sorted(zoneinfo.available_timezones()))


def set_time_zone(request, name: str) -> None:
    """Store the signed-in person's zone ("" for the site's) and use it from this request on."""
    name = name.strip()
    if name and name not in time_zone_names():
        raise ValidationError({"time_zone": _("Unknown time zone %(name)r: give an IANA name such as "
                                              "Europe/Berlin or Asia/Shanghai.") % {"name": name[:64]}})
    Preference.objects.update_or_create(user=request.user, defaults={"time_zone": name})
    request.session[SESSION_KEY] = name
    _activate(name)


def current_time_zone_name() -> str:
    return timezone.get_current_timezone_name()


def _activate(name: str) -> None:
    if name and name in time_zone_names():
        timezone.activate(zoneinfo.ZoneInfo(name))
    else:
        timezone.deactivate()  # the site's TIME_ZONE


@receiver(user_logged_in, dispatch_uid="accounts.time_zone_on_sign_in")
def _remember_on_sign_in(sender, request, user, **kwargs):
    if request is not None and hasattr(request, "session"):
        name = Preference.objects.filter(user=user).values_list("time_zone", flat=True).first() or ""
        request.session[SESSION_KEY] = name


class TimeZoneMiddleware:
    """Activate the person's time zone for the request (from the session: no query)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        session = getattr(request, "session", None)
        _activate(session.get(SESSION_KEY, "") if session is not None else "")
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


"""Lockout of failed sign-ins (django-axes): the authentication backend and the answer a locked client gets.

Failures are counted per username and client address together (``AXES_LOCKOUT_PARAMETERS``), so one
attacker cannot lock a colleague out from another address, and a locked pair is refused even with the
right password until the cool-off ends."""

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_cool_off
from django.http import JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext as _


class LockoutBackend(AxesStandaloneBackend):
    """Axes' check, applied only to sign-ins that come with an HTTP request.

    ``authenticate()`` without a request is not a sign-in from the network (the test client's
    ``login()``, a management command): there is no client address to count, and axes would refuse it."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def _minutes(request) -> int:
    cool_off = get_cool_off(request)
    return max(1, round(cool_off.total_seconds() / 60)) if cool_off else 0


def lockout_response(request, original_response=None, credentials=None):
    """429 with a translated message: JSON for the API, the lockout page for browsers."""
    minutes = _minutes(request)
    message = (_("Too many failed sign-ins for this account from your address; try again in %(n)d minutes.")
               % {"n": minutes}) if minutes else _("Too many failed sign-ins; ask an administrator to unlock.")
    if request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", ""):
        response = JsonResponse({"detail": message}, status=429)
    else:
        response = render(request, "accounts/locked.html", {"message": message, "minutes": minutes}, status=429)
    if minutes:
        response["Retry-After"] = str(minutes * 60)
    return response

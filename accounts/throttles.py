"""DRF throttles whose rates are read at each request, so settings (and tests) can change them.

DRF's own classes copy ``DEFAULT_THROTTLE_RATES`` once at import."""

from rest_framework import throttling
from rest_framework.settings import api_settings


class _LiveRate:
    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)


class AnonThrottle(_LiveRate, throttling.AnonRateThrottle):
    """Anonymous clients (the token endpoint among them), per address."""


class UserThrottle(_LiveRate, throttling.UserRateThrottle):
    """Signed-in clients, per user whatever the token or session."""

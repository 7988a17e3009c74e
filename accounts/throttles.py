"""DRF throttles whose rates are read at each request, so settings (and tests) can change them, and whose
client address is the portal's one rule (``gpuportal.web.clients``).

DRF's own classes copy ``DEFAULT_THROTTLE_RATES`` once at import, and key anonymous clients on a raw
``X-Forwarded-For`` (its ``NUM_PROXIES`` unset): a client that varies that header is a new client each time."""

from rest_framework import throttling
from rest_framework.settings import api_settings

from gpuportal.web.clients import client_address


class _LiveRate:
    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_ident(self, request):
        """The client's address by the trusted-proxy rule the audit log and the sign-in lockout use."""
        return client_address(request.META)


class AnonThrottle(_LiveRate, throttling.AnonRateThrottle):
    """Anonymous clients (the token endpoint among them), per address."""


class UserThrottle(_LiveRate, throttling.UserRateThrottle):
    """Signed-in clients, per user whatever the token or session."""

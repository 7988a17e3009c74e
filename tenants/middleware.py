"""The tenant a log line belongs to (``gpuportal.observability.logs``): the tenants the signed-in user is a member of.

Looked up once a minute per user and process, not on every request: the request log must not add a query
to every page (the pages' query budgets are asserted in tests), and a membership change showing in the logs
a minute late misleads nobody."""

from __future__ import annotations

import logging
import time

from django.db import DatabaseError

from gpuportal.observability.logs import log_tenant, request_logger

from .models import Membership

#: Seconds a user's tenant names are reused for the logs.
TTL_SECONDS = 60.0
_names: dict[int, tuple[float, str]] = {}


def tenant_names(user_id: int) -> str:
    now = time.monotonic()
    cached = _names.get(user_id)
    if cached and now - cached[0] < TTL_SECONDS:
        return cached[1]
    names = ",".join(sorted(set(Membership.objects.filter(user_id=user_id).values_list("tenant__name", flat=True))))
    if len(_names) > 10000:  # a bound, not an LRU: a burst of distinct users just starts the cache over
        _names.clear()
    _names[user_id] = (now, names or "-")
    return names or "-"


class TenantLogContextMiddleware:
    """After authentication: the user's tenants into the log context of the request — before the view for a
    session, after it for an API token (DRF authenticates in the view)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        self._remember(request)
        response = self.get_response(request)
        if log_tenant.get() == "-":
            self._remember(request)
        return response

    @staticmethod
    def _remember(request) -> None:
        if not request_logger.isEnabledFor(logging.INFO):
            return  # no request line is written (the embedded demo's text logs): no lookup either
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            try:
                log_tenant.set(tenant_names(user.pk))
            except DatabaseError:  # a log line's context is not worth failing the answer (a lost connection)
                log_tenant.set("-")

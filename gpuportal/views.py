"""Error pages the project needs beyond Django's own handlers.

403 and 404 use Django's handlers, which render ``templates/403.html`` (with ``PermissionDenied``'s message
as ``exception``) and ``templates/404.html`` inside the site's layout. Two cases need a view of their own:
a refused CSRF check, which Django answers with a bare page of its own, and the 500 page, which must render
even when what failed is the database or the template engine.
"""

from __future__ import annotations

import logging
import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, HttpResponseForbidden, HttpResponseServerError, JsonResponse
from django.template import loader
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

logger = logging.getLogger(__name__)

def csrf_failure(request, reason: str = ""):
    """``CSRF_FAILURE_VIEW``: the 403 page in the site's layout, saying what to do (reload and send again).

    Django's middleware has already logged the refusal with its reason; the reason ("CSRF cookie not set.",
    "Origin checking failed …") is shown too, since it tells the user what their browser did."""
    html = loader.render_to_string("403.html", {"exception": reason, "csrf_failure": True}, request=request)
    return HttpResponseForbidden(html)


#: Seconds a client should wait before retrying when the database connection was lost under its request.
RETRY_AFTER_SECONDS = 2
#: What such a client reads (the API's views answer it too: ``gpuportal.web.api.DatabaseUnavailable``).
DATABASE_UNAVAILABLE = gettext_lazy("The database did not answer; try again in a few seconds (a submission sent "
                                    "again with the same Idempotency-Key is stored once).")


def _database_unavailable(request) -> HttpResponse:
    """503 with Retry-After: the database connection broke under the request (a failover, a restart), wherever
    it broke — in a view, a middleware or a commit. A retry soon is the answer, not a 500 (the API's own views
    answer the same through ``gpuportal.web.api.exception_handler``)."""
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": str(DATABASE_UNAVAILABLE)}, status=503)
    else:
        try:  # the error page, without the request's context processors (they query the database)
            response = HttpResponse(loader.render_to_string("500.html", {"retry": DATABASE_UNAVAILABLE}),
                                    status=503)
        except Exception:  # the page that reports an error must not raise one of its own
            logger.exception("the 503 page could not be rendered")
            response = HttpResponse(str(DATABASE_UNAVAILABLE), status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def server_error(request):
    """``handler500``: ``templates/500.html`` rendered without the request, hence without the context
    processors, which query the database that may be what failed; plain text if even that fails. A lost
    database connection is a 503 instead (``_database_unavailable``)."""
    if isinstance(sys.exc_info()[1], OperationalError | InterfaceError):
        logger.warning("request lost its database connection: %s", sys.exc_info()[1])
        return _database_unavailable(request)
    try:
        return HttpResponseServerError(loader.render_to_string("500.html"))
    except Exception:  # the page that reports an error must not raise one of its own
        logger.exception("the 500 page could not be rendered")
        return HttpResponseServerError(_("Server error: the portal could not finish this request. Try again in a "
                                         "minute."), content_type="text/plain; charset=utf-8")

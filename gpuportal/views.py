"""Error pages the project needs beyond Django's own handlers (issue 14, part 9).

403 and 404 use Django's handlers, which render ``templates/403.html`` (with ``PermissionDenied``'s message
as ``exception``) and ``templates/404.html`` inside the site's layout. Two cases need a view of their own:
a refused CSRF check, which Django answers with a bare page of its own, and the 500 page, which must render
even when what failed is the database or the template engine.
"""

from __future__ import annotations

import logging

from django.http import HttpResponseForbidden, HttpResponseServerError
from django.template import loader
from django.utils.translation import gettext as _

logger = logging.getLogger(__name__)

def csrf_failure(request, reason: str = ""):
    """``CSRF_FAILURE_VIEW``: the 403 page in the site's layout, saying what to do (reload and send again).

    Django's middleware has already logged the refusal with its reason; the reason ("CSRF cookie not set.",
    "Origin checking failed …") is shown too, since it tells the user what their browser did."""
    html = loader.render_to_string("403.html", {"exception": reason, "csrf_failure": True}, request=request)
    return HttpResponseForbidden(html)


def server_error(request):
    """``handler500``: ``templates/500.html`` rendered without the request, hence without the context
    processors, which query the database that may be what failed; plain text if even that fails."""
    try:
        return HttpResponseServerError(loader.render_to_string("500.html"))
    except Exception:  # the page that reports an error must not raise one of its own
        logger.exception("the 500 page could not be rendered")
        return HttpResponseServerError(_("Server error: the portal could not finish this request. Try again in a "
                                         "minute."), content_type="text/plain; charset=utf-8")

"""Review pack downloads: ``/reports/YYYY-MM/pack.pdf`` and ``.../<tenant>/pack.xlsx``.

Thin: who may read a pack is exactly who may read the month's report page (``permissions.report_scope``); the
document is ``document.build_review`` in the request's language and ``render.formats`` turns it into a file.
"""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.utils.cache import patch_cache_control
from django.utils.translation import get_language
from django.utils.translation import gettext as _

from metering import permissions as services
from metering.reports.views import month_or_404
from metering.review import stored
from metering.review.render import formats as review_formats


@login_required
def review_pack(request, month, fmt, tenant=None):
    if fmt not in review_formats.FORMATS:
        raise Http404(_("No review pack as %(fmt)s: pdf or xlsx.") % {"fmt": fmt})
    month = month_or_404(month)
    scope = services.report_scope(request.user, tenant)
    pack = stored.pack_file(month, scope, fmt, get_language())
    response = HttpResponse(pack.content, content_type=pack.content_type)
    response["Content-Disposition"] = f'attachment; filename="{pack.filename}"'
    patch_cache_control(response, private=True)  # a tenant's figures: never kept by a shared cache
    return response

"""Review pack downloads (issue 19) — being written."""

from django.http import Http404


def review_pack(request, month, fmt, tenant=None):
    raise Http404

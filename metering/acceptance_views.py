"""The acceptance checklist page (issue 19) — being written."""

from django.http import Http404


def checklist(request):
    raise Http404

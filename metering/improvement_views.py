"""Improvement action pages (issue 19) — being written."""

from django.http import Http404


def action_list(request):
    raise Http404


def action_create(request):
    raise Http404


def action_edit(request, pk):
    raise Http404

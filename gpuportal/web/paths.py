"""Paths of the portal by their URL names, for code that runs outside the portal's own URL configuration.

The workload origin routes its requests through a URL configuration of its own (without the portal's names) yet
serves notebooks and services at the portal's paths, and Celery tasks build ingress and notebook paths with no
request at all: both ask the portal's configuration explicitly."""

from django.conf import settings
from django.urls import reverse


def portal_path(name: str, *args) -> str:
    """``portal_path("scheduling:job-detail", 12)`` -> ``/jobs/12/`` whichever URL configuration is active."""
    return reverse(name, args=list(args), urlconf=settings.ROOT_URLCONF)

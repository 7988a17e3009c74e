"""Shared abstract base classes (no domain rules here)."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class TimeStampedModel(models.Model):
    """Creation and last-change times, which every row an operator may have to explain should carry."""

    created = models.DateTimeField(_("created"), auto_now_add=True)
    last_updated = models.DateTimeField(_("last updated"), auto_now=True)

    class Meta:
        abstract = True

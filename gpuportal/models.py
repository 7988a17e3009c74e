"""Shared abstract base classes (no domain rules here)."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class TimeStampedModel(models.Model):
    """Creation and last-change times, which every row an operator may have to explain should carry."""

    created = models.DateTimeField(_("created"), auto_now_add=True)
    last_updated = models.DateTimeField(_("last updated"), auto_now=True)

    class Meta:
        abstract = True


class OperationalCounter(models.Model):
    """A counter or gauge for ``/metrics`` that several processes (workers, beat, web) add to.

    Kept in the database so that a scrape of any web process sees what every worker counted.
    """

    name = models.CharField(max_length=100)
    labels = models.CharField(max_length=200, blank=True, help_text="Prometheus label text, e.g. cluster=\"sim\".")
    value = models.FloatField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "metering_operationalcounter"  # moved from metering; the table keeps its name
        constraints = [models.UniqueConstraint(fields=["name", "labels"], name="operational_counter_unique")]

    def __str__(self):
        return f"{self.name}{{{self.labels}}} {self.value}"


class IdempotencyRecord(models.Model):
    """The answer given to a creating request sent with an ``Idempotency-Key`` header, so that a client that
    retries (a lost reply, a timeout) gets the same answer again instead of a second job or request."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    path = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of the method, path and body.")
    status_code = models.PositiveSmallIntegerField(null=True)
    body = models.JSONField(null=True)
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key", "path"], name="idempotency_unique_key")]

    def __str__(self):
        return f"{self.user_id} {self.path} {self.key}"

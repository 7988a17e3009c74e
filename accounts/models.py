"""API tokens, stored as the SHA-256 of their secret so that a copy of the database grants no access."""

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class RevocationReason(models.TextChoices):
    """Why a token stopped working, kept so that its owner can tell a revocation from an expiry."""

    USER = "user", _("revoked by its owner")
    ADMIN = "admin", _("revoked by an administrator")
    PASSWORD_CHANGED = "password_changed", _("password changed")


class ApiTokenQuerySet(models.QuerySet):
    def usable(self):
        """Tokens that still authenticate: not revoked, not expired."""
        return self.filter(revoked_at__isnull=True, expires_at__gt=timezone.now())


class ApiToken(models.Model):
    """One named API token of a user. Only ``prefix`` (to recognise it) and ``digest`` are kept."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens",
                             verbose_name=_("user"))
    name = models.CharField(_("name"), max_length=100)
    prefix = models.CharField(_("prefix"), max_length=16, db_index=True)
    digest = models.CharField(_("SHA-256 of the token"), max_length=64, unique=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    expires_at = models.DateTimeField(_("expires"))
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)
    revoked_reason = models.CharField(_("revocation reason"), max_length=20, choices=RevocationReason.choices,
                                      blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_usable(self) -> bool:
        return self.revoked_at is None and self.expires_at > timezone.now()

    @property
    def state(self) -> str:
        """A word for the list pages: active, expired or revoked."""
        if self.revoked_at is not None:
            return str(_("revoked"))
        return str(_("active")) if self.expires_at > timezone.now() else str(_("expired"))


class Preference(models.Model):
    """A person's display settings. Times are shown in ``time_zone`` (an IANA name such as
    ``Asia/Shanghai``), or in the site's zone (``TIME_ZONE``) when it is empty; pages in ``language`` (one of
    ``LANGUAGES``), or as the browser asks when it is empty."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preference")
    time_zone = models.CharField(_("time zone"), max_length=64, blank=True)
    language = models.CharField(_("language"), max_length=16, blank=True, choices=settings.LANGUAGES)
    # The job list as the person last shaped it (scheduling.jobs.columns keys; empty: the default columns/order).
    job_columns = models.JSONField(_("job list columns"), default=list, blank=True)
    job_sort = models.CharField(_("job list order"), max_length=32, blank=True)

    class Meta:
        verbose_name = _("preference")
        verbose_name_plural = _("preferences")

    def __str__(self):
        return f"{self.user}: {self.time_zone or 'site default'}"

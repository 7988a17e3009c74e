from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AccountsConfig(AppConfig):
    """Connects the receivers that revoke a user's API tokens when the password changes and that carry the
    person's time zone into the session at sign-in."""

    name = "accounts"
    verbose_name = _("Accounts")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from accounts import signals  # noqa: F401  (connects the receivers; models are ready only now)
        from accounts.preferences import timezones  # noqa: F401  (connects the receivers; models are ready only now)

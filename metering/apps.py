from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MeteringConfig(AppConfig):
    """Usage rollups and monthly reports live here (its own issue); scheduling never imports it."""

    name = "metering"
    verbose_name = _("Metering")

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class GpuPortalConfig(AppConfig):
    """The project package as an app: shared helpers and the operational counters every layer adds to."""

    name = "gpuportal"
    label = "gpuportal"
    verbose_name = _("GPU Portal")
    default_auto_field = "django.db.models.BigAutoField"

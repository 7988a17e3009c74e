from django.apps import AppConfig
from django.db.backends.signals import connection_created
from django.utils.translation import gettext_lazy as _

from gpuportal.storage.db import register_sqlite_functions


class GpuPortalConfig(AppConfig):
    """The project package as an app: shared helpers and the operational counters every layer adds to."""

    name = "gpuportal"
    label = "gpuportal"
    verbose_name = _("GPU Portal")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        connection_created.connect(register_sqlite_functions, dispatch_uid="gpuportal-sqlite-functions")

from django.apps import AppConfig

from gpuportal import pagecache


class GovernanceConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "governance"
    verbose_name = "Governance"

    def ready(self):
        # Models can be imported only once the app registry is ready, so not at the top of this module.
        from . import receivers  # noqa: F401
        from .models import Notification

        pagecache.watch(Notification)  # the unread count in every page's header

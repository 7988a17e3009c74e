from django.apps import AppConfig

from gpuportal.storage import pagecache


class GovernanceConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "governance"
    verbose_name = "Governance"

    def ready(self):
        # Models can be imported only once the app registry is ready, so not at the top of this module.
        from governance import receivers  # noqa: F401
        from governance.models import Notification

        pagecache.watch(Notification)  # the unread count in every page's header

from django.apps import AppConfig


class AuditConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "audit"
    verbose_name = "Audit log"

    def ready(self):
        from . import receivers  # noqa: F401  (model changes made in the Django admin are audited too)

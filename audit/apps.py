from django.apps import AppConfig


class AuditConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "audit"
    verbose_name = "Audit log"

    def ready(self):
        # Models can be imported only once the app registry is ready, so not at the top of this module.
        from tenants.models import Membership, PlatformRole, Quota

        from . import privileges  # noqa: F401  (connects its receivers: accounts' flags, groups and tokens)
        from .models import AuditAction as A
        from .registry import audit_changes

        audit_changes(Quota, A.QUOTA_CHANGE, A.QUOTA_CHANGE, A.QUOTA_CHANGE,
                      ["tenant", "gpu_model", "guaranteed_gpus", "limit_gpus"])
        audit_changes(Membership, A.MEMBERSHIP_ADD, A.MEMBERSHIP_CHANGE, A.MEMBERSHIP_REMOVE,
                      ["user", "tenant", "role"])
        audit_changes(PlatformRole, A.PLATFORM_ROLE_ADD, A.PLATFORM_ROLE_ADD, A.PLATFORM_ROLE_REMOVE, ["user", "role"])

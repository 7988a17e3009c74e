from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DirectoryConfig(AppConfig):
    """Sign-in through the site's directory (LDAP, OpenID Connect) and the mapping of its groups to tenant
    memberships and platform roles."""

    name = "directory"
    verbose_name = _("Directory sign-in")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Models and django-auth-ldap's signal may be imported only once the apps are loaded. ldap_auth connects
        # the receiver that tells the login page the directory could not be reached.
        from audit.models import AuditAction
        from audit.registry import audit_changes
        from directory.ldap import auth as ldap_auth  # noqa: F401
        from directory.models import GroupMapping

        # A mapping decides who becomes a tenant member or a platform admin at their next sign-in, so every
        # change of one is audited from the model signals, whoever makes it (the page, map_group, the shell).
        audit_changes(GroupMapping, AuditAction.DIRECTORY_MAPPING_CHANGE, AuditAction.DIRECTORY_MAPPING_CHANGE,
                      AuditAction.DIRECTORY_MAPPING_CHANGE, ["group", "tenant", "role", "platform_role"])

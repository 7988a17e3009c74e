from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DirectoryConfig(AppConfig):
    """Sign-in through the site's directory (LDAP, OpenID Connect) and the mapping of its groups to tenant
    memberships and platform roles (issue 16)."""

    name = "directory"
    verbose_name = _("Directory sign-in")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Connects the receiver that tells the login page the directory could not be reached; it needs
        # django-auth-ldap's signal, which may be imported only once the apps are loaded.
        from . import ldap_auth  # noqa: F401

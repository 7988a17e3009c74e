"""The roles a person may hold: in one tenant (``Role``) and above tenants (``PlatformRoleKind``).

Plain enumerations with no model behind them, so that ``access`` (who may do what), ``scoping`` (which rows
a person sees) and ``models`` (where the roles are stored) all read them from here without importing each
other in a loop. Compare a role with these members, never with its stored string.
"""

from django.db import models
from django.utils.translation import gettext_lazy as _


class Role(models.TextChoices):
    """What a member may do inside one tenant."""

    RESEARCHER = "researcher", _("Researcher")
    APPROVER = "approver", _("Approver")
    TENANT_ADMIN = "tenant_admin", _("Tenant admin")
    VIEWER = "viewer", _("Viewer")


#: Roles that may submit jobs in their tenant.
SUBMITTING_ROLES = frozenset({Role.RESEARCHER, Role.APPROVER, Role.TENANT_ADMIN})


class PlatformRoleKind(models.TextChoices):
    """A role above tenants: ``platform_admin`` sees and changes every tenant (read-write); ``manager`` sees
    every tenant's jobs, quotas and reports but changes nothing (read-only); ``auditor`` reads the whole
    audit log. Also reachable as ``PlatformRole.Kind``."""

    PLATFORM_ADMIN = "platform_admin", _("Platform admin (all tenants, read-write)")
    MANAGER = "manager", _("Manager (all tenants, read-only)")
    AUDITOR = "auditor", _("Auditor (reads the whole audit log)")

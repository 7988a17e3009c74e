from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _

from gpuportal.storage import pagecache


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = _("Tenants")

    def ready(self):
        # Models can be imported only once the app registry is ready, so not at the top of this module.
        from .models import Membership, PlatformRole, Project, Quota, Tenant

        # The dashboard's quota rows, and who sees which jobs (a revoked role shows at once).
        pagecache.watch(Quota, Membership, PlatformRole, Tenant, Project)

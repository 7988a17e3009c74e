from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _

from gpuportal.storage import pagecache


class FleetConfig(AppConfig):
    """Clusters, nodes, accelerators, readings, health, node agents and their tokens."""

    name = "fleet"
    verbose_name = _("Fleet")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Models can be imported only once the app registry is ready, so not at the top of this module.
        from audit.models import AuditAction
        from audit.registry import audit_changes
        from fleet.models import GPU, Cluster, Node

        pagecache.watch(Cluster, Node, GPU)  # the dashboard's capacity summary

        audit_changes(Cluster, AuditAction.CLUSTER_CHANGE, AuditAction.CLUSTER_CHANGE, AuditAction.CLUSTER_CHANGE,
                      ["name", "executor", "ordering", "placement", "backfill", "preemption",
                       "fair_share_half_life_hours"])

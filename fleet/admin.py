from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _

from fleet.agents import tokens as agent_tokens
from fleet.models import GPU, Cluster, Node, NodeEvent


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "executor", "ordering", "placement", "backfill", "preemption",
                    "fair_share_half_life_hours")


class GPUInline(admin.TabularInline):
    model = GPU
    extra = 0
    fields = ("index", "uuid", "model", "memory_mb", "health", "ecc_dbe", "last_xid")
    readonly_fields = ("health", "ecc_dbe", "last_xid")


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ("name", "cluster", "gpu_model", "datacenter", "rack", "network_domain", "health", "admin_state",
                    "last_seen", "agent_token_version")
    list_filter = ("cluster", "gpu_model", "health", "admin_state", "datacenter")
    search_fields = ("name", "rack")
    readonly_fields = ("health", "last_seen", "last_poll_error", "agent_token_issued_at", "agent_version",
                       "driver_version", "cuda_version")
    inlines = [GPUInline]
    actions = ["issue_agent_token"]

    @admin.action(description=_("Issue a new agent token (revokes the old one)"))
    def issue_agent_token(self, request, queryset):
        for node in queryset:
            token = agent_tokens.issue(node, actor=request.user)
            self.message_user(request, _("%(node)s: %(token)s — copy it now, it is not shown again.") % {
                "node": node.name, "token": token}, messages.WARNING)


@admin.register(NodeEvent)
class NodeEventAdmin(admin.ModelAdmin):
    list_display = ("at", "node", "gpu", "kind", "from_state", "to_state", "reason", "actor")
    list_filter = ("kind",)

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

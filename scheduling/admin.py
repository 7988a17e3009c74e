from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _

from fleet import agent_tokens
from fleet.models import GPU, Cluster, Node, NodeEvent

from .models import Job, JobEvent, Reservation, TaskType


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "executor", "ordering", "placement", "backfill", "preemption",
                    "fair_share_half_life_hours")


@admin.register(Reservation)
class ReservationAdmin(admin.ModelAdmin):
    list_display = ("tenant", "gpu_model", "gpus", "start", "end", "created_by")
    list_filter = ("gpu_model", "tenant")

    def save_model(self, request, obj, form, change):
        if not obj.created_by_id:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


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


@admin.register(TaskType)
class TaskTypeAdmin(admin.ModelAdmin):
    list_display = ("code", "name", "priority", "preemptible", "requires_approval", "default_max_runtime_minutes")


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    readonly_fields = ("at", "kind", "from_status", "to_status", "reason", "actor", "data")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    """Read-only here: jobs change state only through the portal's services (and so get their events)."""

    list_display = ("id", "name", "tenant", "owner", "task_type", "gpu_model", "status", "submitted_at")
    list_filter = ("status", "tenant", "gpu_model", "task_type")
    inlines = [JobEventInline]

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False

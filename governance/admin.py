from django.contrib import admin

from governance.models import IdlePolicy, IdleWatch, Notification, PriorityRequest


@admin.register(IdlePolicy)
class IdlePolicyAdmin(admin.ModelAdmin):
    list_display = ("__str__", "tenant", "task_type", "cluster", "exempt", "threshold_pct", "idle_minutes",
                    "grace_minutes")


@admin.register(PriorityRequest)
class PriorityRequestAdmin(admin.ModelAdmin):
    """Read-only here: requests are decided on the portal's pages or the API, where the rules are."""

    list_display = ("pk", "kind", "tenant", "requester", "state", "scope", "decided_by", "created")
    list_filter = ("state", "kind", "scope")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


admin.site.register(IdleWatch)
admin.site.register(Notification)

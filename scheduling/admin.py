from django.contrib import admin

from scheduling.models import Job, JobEvent, Reservation, TaskType


@admin.register(Reservation)
class ReservationAdmin(admin.ModelAdmin):
    list_display = ("tenant", "gpu_model", "gpus", "start", "end", "created_by")
    list_filter = ("gpu_model", "tenant")

    def save_model(self, request, obj, form, change):
        if not obj.created_by_id:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


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

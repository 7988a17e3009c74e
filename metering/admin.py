"""Prices are history: admins add a new row from a day on; existing prices and frozen reports are read-only."""

from django.contrib import admin

from metering.models import GpuPrice, MonthlyReport


@admin.register(GpuPrice)
class GpuPriceAdmin(admin.ModelAdmin):
    list_display = ("gpu_model", "price_per_gpu_hour", "effective_from", "note", "created_by", "created")
    list_filter = ("gpu_model",)
    readonly_fields = ("created_by",)

    def has_change_permission(self, request, obj=None):
        return obj is None

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        obj.created_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(MonthlyReport)
class MonthlyReportAdmin(admin.ModelAdmin):
    list_display = ("month", "tenant", "generated_at", "generated_by", "reason", "superseded_at")
    list_filter = ("tenant",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

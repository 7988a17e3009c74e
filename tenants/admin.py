from django.contrib import admin

from .models import Department, DepartmentQuota, Membership, PlatformRole, Project, Quota, Tenant


class ProjectInline(admin.TabularInline):
    model = Project
    extra = 0


class QuotaInline(admin.TabularInline):
    model = Quota
    extra = 0


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ("name", "display_name", "fair_share_weight", "department")
    search_fields = ("name", "display_name")
    inlines = [ProjectInline, QuotaInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "tenant", "role")
    list_filter = ("tenant", "role")


@admin.register(PlatformRole)
class PlatformRoleAdmin(admin.ModelAdmin):
    list_display = ("user", "role")


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ("tenant", "gpu_model", "guaranteed_gpus", "limit_gpus")
    list_filter = ("gpu_model",)


class DepartmentQuotaInline(admin.TabularInline):
    model = DepartmentQuota
    extra = 0


@admin.register(Department)
class DepartmentAdmin(admin.ModelAdmin):
    list_display = ("name", "display_name")
    inlines = [DepartmentQuotaInline]

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from accounts import tokens
from accounts.models import ApiToken, RevocationReason


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Read-only view of tokens (there is no secret to show: none is stored); revocation by the action."""

    list_display = ["user", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_reason"]
    search_fields = ["user__username", "name", "prefix"]
    readonly_fields = ["user", "name", "prefix", "digest", "created_at", "expires_at", "last_used_at",
                       "revoked_at", "revoked_reason"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.action(description=_("Revoke the selected tokens"))
    def revoke(self, request, queryset):
        for token in queryset:
            tokens.revoke(token, RevocationReason.ADMIN)

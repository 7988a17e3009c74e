from rest_framework import generics, serializers

from ..filtersets import AuditFilterSet
from ..models import AuditRecord
from ..views import readable_records


class AuditRecordSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name")
    tenant = serializers.SlugRelatedField(slug_field="name", read_only=True)
    before = serializers.JSONField(read_only=True, help_text="The audited fields before the change (null: created).")
    after = serializers.JSONField(read_only=True, help_text="The audited fields after the change (null: deleted).")

    class Meta:
        model = AuditRecord
        fields = ["seq", "at", "actor", "action", "object_type", "object_id", "object_repr", "tenant", "before",
                  "after", "reason", "source_address", "prev_hash", "hash"]


class AuditRecordList(generics.ListAPIView):
    """Audit records, newest first: all for platform admins and auditors, their tenants' for tenant admins.
    Filters: ``actor``, ``tenant``, ``action`` (repeatable), ``since``, ``until`` (ISO times)."""

    serializer_class = AuditRecordSerializer
    filterset_class = AuditFilterSet

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular reads the model while it has no user
            return AuditRecord.objects.none()
        return readable_records(self.request.user)

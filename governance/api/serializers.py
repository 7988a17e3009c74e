from rest_framework import serializers

from ..models import Notification, PriorityRequest


class PriorityRequestSerializer(serializers.ModelSerializer):
    """A request as the API shows it; ``decided_by`` and ``requester`` are usernames."""

    tenant = serializers.SlugRelatedField(slug_field="name", read_only=True)
    requester = serializers.SlugRelatedField(slug_field="username", read_only=True)
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    task_type = serializers.SlugRelatedField(slug_field="code", read_only=True)
    job = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = PriorityRequest
        fields = ["id", "kind", "state", "scope", "tenant", "requester", "justification", "job", "task_type",
                  "gpu_model", "gpus", "start", "end", "max_runtime_minutes", "guaranteed", "limit", "impact",
                  "expires_at", "decided_by", "decided_at", "comment", "created"]
        read_only_fields = fields


class PriorityRequestCreateSerializer(serializers.Serializer):
    """Body of ``POST /api/priority-requests/`` (validated by the governance service, errors by field)."""

    kind = serializers.ChoiceField(choices=["priority", "burst", "reservation", "runtime_extension", "quota"])
    justification = serializers.CharField()
    job = serializers.IntegerField(required=False)
    task_type = serializers.CharField(required=False)
    tenant = serializers.CharField(required=False)
    gpu_model = serializers.CharField(required=False)
    gpus = serializers.IntegerField(required=False)
    start = serializers.DateTimeField(required=False)
    end = serializers.DateTimeField(required=False)
    max_runtime_minutes = serializers.IntegerField(required=False)
    guaranteed = serializers.IntegerField(required=False)
    limit = serializers.IntegerField(required=False)


class DecisionSerializer(serializers.Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class NotificationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Notification
        fields = ["id", "kind", "title", "body", "url", "created", "read_at", "emailed"]

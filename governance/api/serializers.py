from django.utils.translation import gettext as _
from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers

from fleet.catalogue import gpu_model_catalogue
from governance.models import Notification, PriorityRequest, RequestKind
from governance.services import (
    MAX_COMMENT,
    MAX_EXTENDED_RUNTIME_MINUTES,
    MAX_JUSTIFICATION,
    MAX_QUOTA_GPUS,
    MIN_JUSTIFICATION,
)
from gpuportal.web.api import RequestSerializer, choose_from, text_field, whole_number_field
from scheduling.models import TaskType


class PriorityRequestSerializer(serializers.ModelSerializer):
    """A request as the API shows it; ``decided_by`` and ``requester`` are usernames."""

    tenant = serializers.SlugRelatedField(slug_field="name", read_only=True)
    requester = serializers.SlugRelatedField(slug_field="username", read_only=True)
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    task_type = serializers.SlugRelatedField(slug_field="code", read_only=True)
    job = serializers.PrimaryKeyRelatedField(read_only=True)
    impact = serializers.DictField(read_only=True, help_text="What approving it would change, as the scheduler "
                                                             "computed it when it was asked (or decided).")

    class Meta:
        model = PriorityRequest
        fields = ["id", "kind", "state", "scope", "tenant", "requester", "justification", "job", "jobs", "task_type",
                  "gpu_model", "gpus", "start", "end", "max_runtime_minutes", "guaranteed", "limit", "impact",
                  "expires_at", "decided_by", "decided_at", "comment", "created"]
        read_only_fields = fields


def _request_fields() -> dict:
    """Every field a request may have; ``KIND_FIELDS`` says which each kind takes."""
    return {
        "job": whole_number_field(1, 2 ** 63 - 1, help_text="The job concerned: one of your tenants' jobs."),
        "task_type": text_field(32, help_text="The task type to move the job to (a higher priority)."),
        "tenant": text_field(64, required=False, help_text="The tenant concerned; optional when you have one."),
        "gpu_model": text_field(64),
        "gpus": whole_number_field(1, 2 ** 31 - 1, help_text="Burst: GPUs above the limit; reservation: GPUs "
                                                             "held for the tenant."),
        "start": serializers.DateTimeField(),
        "end": serializers.DateTimeField(help_text="After start, in the future, at most 90 days later."),
        "max_runtime_minutes": whole_number_field(1, MAX_EXTENDED_RUNTIME_MINUTES, help_text=(
            "More than the job has now.")),
        "guaranteed": whole_number_field(0, MAX_QUOTA_GPUS),
        "limit": whole_number_field(0, MAX_QUOTA_GPUS, help_text="At least guaranteed."),
    }


#: Which fields each kind of request takes (all required but ``tenant``); the one table the API checks and the
#: schema shows (a oneOf on ``kind``).
KIND_FIELDS = {
    RequestKind.PRIORITY: ("job", "task_type"),
    RequestKind.RUNTIME_EXTENSION: ("job", "max_runtime_minutes"),
    RequestKind.BURST: ("tenant", "gpu_model", "gpus", "start", "end"),
    RequestKind.RESERVATION: ("tenant", "gpu_model", "gpus", "start", "end"),
    RequestKind.QUOTA: ("tenant", "gpu_model", "guaranteed", "limit"),
}


class RequestKindSerializer(RequestSerializer):
    """What every request has: its kind and why."""

    kind = serializers.ChoiceField(choices=[k.value for k in KIND_FIELDS])
    justification = text_field(MAX_JUSTIFICATION, min_length=MIN_JUSTIFICATION,
                               help_text="Why, for whom, until when: approvers decide from it.")

    def get_fields(self):
        fields = super().get_fields()
        choose_from(fields, "task_type", TaskType.objects.values_list("code", flat=True), _("task type"))
        choose_from(fields, "gpu_model", gpu_model_catalogue(), _("GPU model"))
        return fields


def _kind_serializer(kind: RequestKind, names: tuple) -> type:
    all_fields = _request_fields()
    return type(f"{kind.value.title().replace('_', '')}RequestSerializer", (RequestKindSerializer,), {
        "__module__": __name__, "__doc__": f"A request of kind {kind.value}: {kind.label}.",
        "kind": serializers.ChoiceField(choices=[kind.value]), **{name: all_fields[name] for name in names}})


KIND_SERIALIZERS = {kind.value: _kind_serializer(kind, names) for kind, names in KIND_FIELDS.items()}


def request_body(data) -> serializers.Serializer:
    """The serializer of ``POST /api/priority-requests/`` for the body's kind (a 400 on ``kind`` without one)."""
    kind = data.get("kind") if isinstance(data, dict) else None
    return KIND_SERIALIZERS.get(kind if isinstance(kind, str) else "", RequestKindSerializer)(data=data)


#: The schema of that body: one of the kinds, told apart by ``kind``.
PRIORITY_REQUEST_BODY = PolymorphicProxySerializer(
    component_name="PriorityRequestCreate", serializers=KIND_SERIALIZERS,
    resource_type_field_name="kind")


class DecisionSerializer(RequestSerializer):
    comment = text_field(MAX_COMMENT, required=False, blank=True, help_text="What the requester will read.")


class NotificationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Notification
        fields = ["id", "kind", "title", "body", "url", "created", "read_at", "emailed"]


class MarkedReadSerializer(serializers.Serializer):
    marked_read = serializers.IntegerField(help_text="How many notifications were unread.")

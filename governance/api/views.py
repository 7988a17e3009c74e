from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import generics, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from governance import services
from governance.api.serializers import (
    PRIORITY_REQUEST_BODY,
    DecisionSerializer,
    MarkedReadSerializer,
    NotificationSerializer,
    PriorityRequestSerializer,
    request_body,
)
from governance.models import Notification
from gpuportal.web.api import IDEMPOTENCY_KEY
from gpuportal.web.idempotency import idempotent

REQUEST_EXAMPLES = [
    OpenApiExample("A higher priority for a job", request_only=True, value={
        "kind": "priority", "job": 42, "task_type": "training",
        "justification": "The camera-ready deadline is on Friday; this run feeds the last table."}),
    OpenApiExample("A burst above the quota for two days", request_only=True, value={
        "kind": "burst", "tenant": "vision", "gpu_model": "A100", "gpus": 8, "start": "2026-12-01T09:00:00Z",
        "end": "2026-12-03T09:00:00Z", "justification": "Ablations for the paper before the holidays."}),
]


class PriorityRequestViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Requests of the caller's tenants (all for platform admins). Another tenant's request is 404."""

    serializer_class = PriorityRequestSerializer
    filterset_fields = ["state", "kind"]

    def get_queryset(self):
        return services.requests_for(self.request.user)

    @extend_schema(request=PRIORITY_REQUEST_BODY, responses={201: PriorityRequestSerializer},
                   parameters=[IDEMPOTENCY_KEY], examples=REQUEST_EXAMPLES)
    @idempotent
    def create(self, request):
        body = request_body(request.data)
        body.is_valid(raise_exception=True)
        created = services.submit_request(request.user, body.validated_data)
        return Response(PriorityRequestSerializer(created).data, status=status.HTTP_201_CREATED)

    def _decide(self, request, approve: bool):
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        decided = services.decide(request.user, self.get_object(), approve, body.validated_data.get("comment", ""))
        return Response(PriorityRequestSerializer(decided).data)

    @extend_schema(request=DecisionSerializer, responses={200: PriorityRequestSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """Approve and carry out; 403 for your own request or one you may not decide."""
        return self._decide(request, True)

    @extend_schema(request=DecisionSerializer, responses={200: PriorityRequestSerializer})
    @action(detail=True, methods=["post"])
    def deny(self, request, pk=None):
        """Deny, with a comment the requester reads; 403 for your own request or one you may not decide."""
        return self._decide(request, False)


class NotificationList(generics.GenericAPIView):
    """The caller's notifications, newest first (the last 200); ``POST`` marks them all read."""

    serializer_class = NotificationSerializer
    pagination_class = None
    filter_backends: list = []

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular reads the model while it has no user
            return Notification.objects.none()
        return Notification.objects.filter(user=self.request.user)

    @extend_schema(responses={200: NotificationSerializer(many=True)})
    def get(self, request):
        return Response(NotificationSerializer(self.get_queryset()[:200], many=True).data)

    @extend_schema(request=None, responses={200: MarkedReadSerializer})
    def post(self, request):
        count = self.get_queryset().filter(read_at__isnull=True).update(read_at=timezone.now())
        return Response(MarkedReadSerializer({"marked_read": count}).data)

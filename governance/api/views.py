from django.core.exceptions import ValidationError
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError as ApiValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from gpuportal.api import IDEMPOTENCY_KEY
from gpuportal.idempotency import idempotent

from .. import services
from ..models import Notification
from .serializers import (
    DecisionSerializer,
    NotificationSerializer,
    PriorityRequestCreateSerializer,
    PriorityRequestSerializer,
)


class PriorityRequestViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Requests of the caller's tenants (all for platform admins). Another tenant's request is 404."""

    serializer_class = PriorityRequestSerializer
    filterset_fields = ["state", "kind"]

    def get_queryset(self):
        return services.requests_for(self.request.user)

    @extend_schema(request=PriorityRequestCreateSerializer, responses={201: PriorityRequestSerializer},
                   parameters=[IDEMPOTENCY_KEY])
    @idempotent
    def create(self, request):
        try:
            created = services.submit_request(request.user, request.data)
        except ValidationError as exc:
            raise ApiValidationError(exc.message_dict) from None
        return Response(PriorityRequestSerializer(created).data, status=status.HTTP_201_CREATED)

    def _decide(self, request, approve: bool):
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        decided = services.decide(request.user, self.get_object(), approve, body.validated_data.get("comment", ""))
        return Response(PriorityRequestSerializer(decided).data)

    @extend_schema(request=DecisionSerializer, responses={200: PriorityRequestSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        return self._decide(request, True)

    @extend_schema(request=DecisionSerializer, responses={200: PriorityRequestSerializer})
    @action(detail=True, methods=["post"])
    def deny(self, request, pk=None):
        return self._decide(request, False)


class NotificationList(APIView):
    """The caller's notifications, newest first; ``POST`` marks them all read."""

    @extend_schema(responses={200: NotificationSerializer(many=True)})
    def get(self, request):
        return Response(NotificationSerializer(Notification.objects.filter(user=request.user)[:200], many=True).data)

    @extend_schema(request=None, responses={200: None})
    def post(self, request):
        count = Notification.objects.filter(user=request.user, read_at__isnull=True).update(read_at=timezone.now())
        return Response({"marked_read": count})

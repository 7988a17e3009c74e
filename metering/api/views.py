"""Reports and prices over the API: the same services and figures as the pages."""

from django.core.exceptions import ValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError as ApiValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import reports, services
from ..models import GpuPrice


class GpuPriceSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = GpuPrice
        fields = ["id", "gpu_model", "price_per_gpu_hour", "effective_from", "note", "created_by", "created"]
        read_only_fields = ["id", "created_by", "created"]


class MonthlyReportView(APIView):
    """The monthly report as JSON (the figures of the page and of ``monthly_report --format json``).

    Without ``tenant``: the platform-wide report (managers and platform admins). With it: that tenant's
    report, 404 for a tenant that is not yours."""

    @extend_schema(parameters=[OpenApiParameter("tenant", str, required=False)], responses={200: OpenApiTypes.OBJECT})
    def get(self, request, month):
        try:
            parsed = reports.parse_month(month)
        except ValueError as exc:
            raise ApiValidationError({"month": [str(exc)]}) from None
        scope = services.report_scope(request.user, request.query_params.get("tenant") or None)
        data, _snapshot = reports.report_for(parsed, scope)
        return Response(data)


class GpuPriceView(APIView):
    """Prices per GPU-hour with their history; platform admins add a price from a day on."""

    @extend_schema(responses={200: GpuPriceSerializer(many=True)})
    def get(self, request):
        return Response(GpuPriceSerializer(GpuPrice.objects.select_related("created_by"), many=True).data)

    @extend_schema(request=GpuPriceSerializer, responses={201: GpuPriceSerializer})
    def post(self, request):
        try:
            price = services.set_price(request.user, request.data)
        except ValidationError as exc:
            raise ApiValidationError(exc.message_dict) from None
        return Response(GpuPriceSerializer(price).data, status=status.HTTP_201_CREATED)

"""Reports and prices over the API: the same services and figures as the pages."""

import re

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.catalogue import gpu_model_catalogue
from gpuportal.web.api import DecimalText, RequestSerializer, choose_from, text_field
from gpuportal.web.validation import calendar_month
from metering import permissions as services
from metering.models import GpuPrice
from metering.reports import monthly as reports

#: ``YYYY-MM``, as the path of a monthly report takes it (a month outside the years kept is a 404).
MONTH = re.compile(r"^[0-9]{4}-(0[1-9]|1[0-2])$")


class GpuPriceSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = GpuPrice
        fields = ["id", "gpu_model", "price_per_gpu_hour", "effective_from", "note", "created_by", "created"]
        read_only_fields = fields


class GpuPriceRequestSerializer(RequestSerializer):
    """A new price of a GPU model from a day on (``POST /api/prices/``, platform admins)."""

    gpu_model = text_field(64)
    price_per_gpu_hour = DecimalText(whole_digits=6, decimal_places=4,
                                     help_text="In the portal's currency, e.g. \"2.5\" (0 to 999999.9999).")
    effective_from = serializers.DateField(help_text="The first day the price applies; one price a model a day.")
    note = text_field(200, required=False, blank=True)

    def get_fields(self):
        fields = super().get_fields()
        choose_from(fields, "gpu_model", gpu_model_catalogue(), _("GPU model"))
        return fields


class MonthlyReportSerializer(serializers.Serializer):
    """The figures of a monthly report (the page's and ``monthly_report --format json``'s). A frozen report
    keeps the figures it was frozen with; the lists' rows are described on the report page."""

    month = serializers.CharField(help_text="YYYY-MM.")
    scope = serializers.ChoiceField(choices=["platform", "tenant"])
    tenant = serializers.CharField(allow_null=True)
    currency = serializers.CharField(required=False)
    generated_at = serializers.CharField(required=False, help_text="ISO time the figures were computed.")
    closed = serializers.BooleanField(required=False, help_text="Whether the month is over.")
    gpu_hours_allocated = serializers.FloatField(required=False)
    gpu_hours_used = serializers.FloatField(required=False)
    efficiency = serializers.FloatField(required=False, allow_null=True)
    measured_share = serializers.FloatField(required=False, allow_null=True)
    cost = serializers.JSONField(required=False, help_text="Cost at the GPU prices, when prices are set.")
    by_project = serializers.ListField(child=serializers.DictField(), required=False)
    by_task_type = serializers.ListField(child=serializers.DictField(), required=False)
    by_gpu_model = serializers.ListField(child=serializers.DictField(), required=False)
    jobs = serializers.JSONField(required=False, help_text="Jobs submitted, finished, failed, cancelled.")
    failures_by_category = serializers.JSONField(required=False)
    wait_seconds_median = serializers.FloatField(required=False, allow_null=True)
    wait_seconds_p95 = serializers.FloatField(required=False, allow_null=True)
    wait_by_task_type = serializers.ListField(child=serializers.DictField(), required=False)
    wait_by_gpu_model = serializers.ListField(child=serializers.DictField(), required=False)
    top_users = serializers.ListField(child=serializers.DictField(), required=False)
    quota_vs_use = serializers.ListField(child=serializers.DictField(), required=False)
    daily = serializers.ListField(child=serializers.DictField(), required=False,
                                 help_text="GPU-hours allocated and used per day and GPU model.")
    slurm = serializers.ListField(
        child=serializers.DictField(), required=False,
        help_text="Per Slurm cluster: the portal's GPU-hours, those of work submitted to Slurm directly (per tenant "
                  "and unmapped account) and slurmdb's own totals.")
    outside_gpu_hours = serializers.FloatField(
        required=False, help_text="GPU-hours of work submitted to Slurm directly (not in gpu_hours_allocated).")


class MonthlyReportView(APIView):
    """The monthly report as JSON (the figures of the page and of ``monthly_report --format json``).

    Without ``tenant``: the platform-wide report (managers and platform admins). With it: that tenant's
    report, 404 for a tenant that is not yours."""

    @extend_schema(parameters=[
        OpenApiParameter("month", str, OpenApiParameter.PATH, pattern=MONTH.pattern, description="YYYY-MM."),
        OpenApiParameter("tenant", str, required=False, description="A tenant's report instead of the platform's.")],
        responses={200: MonthlyReportSerializer})
    def get(self, request, month):
        if not MONTH.match(month):
            raise ValidationError({"month": [_("month must look like 2026-10 (YYYY-MM).")]})
        try:
            parsed = calendar_month(month)
        except ValueError as exc:
            raise NotFound(str(exc)) from None
        scope = services.report_scope(request.user, request.query_params.get("tenant") or None)
        data, _snapshot = reports.report_for(parsed, scope)
        return Response(data)


class GpuPriceView(APIView):
    """Prices per GPU-hour with their history; platform admins add a price from a day on."""

    #: For the schema (gpuportal.web.schema): two identical prices at the same moment, one of them 409.
    error_statuses = ("409",)

    @extend_schema(responses={200: GpuPriceSerializer(many=True)})
    def get(self, request):
        return Response(GpuPriceSerializer(GpuPrice.objects.select_related("created_by"), many=True).data)

    @extend_schema(request=GpuPriceRequestSerializer, responses={201: GpuPriceSerializer}, examples=[
        OpenApiExample("A100 from the first of December", request_only=True, value={
            "gpu_model": "A100", "price_per_gpu_hour": "2.1500", "effective_from": "2026-12-01",
            "note": "New contract with the hosting provider."})])
    def post(self, request):
        body = GpuPriceRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        price = services.set_price(request.user, body.validated_data)
        return Response(GpuPriceSerializer(price).data, status=status.HTTP_201_CREATED)

"""Reports, prices and what-if runs over the API: the same services and figures as the pages."""

import re

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _lazy
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.catalogue import gpu_model_catalogue
from gpuportal.web.api import DecimalText, RequestSerializer, choose_from, number_field, text_field
from gpuportal.web.validation import calendar_month
from metering import permissions as services
from metering.models import GpuPrice, WhatIfRun
from metering.reports import monthly as reports
from metering.whatif import services as whatif
from metering.whatif.change import parse_change

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


class WhatIfRequestSerializer(RequestSerializer):
    """A what-if run to start (``POST /api/what-if/``): a closed month and one change, the options of
    ``manage.py what_if``."""

    month = serializers.RegexField(MONTH.pattern, max_length=7, help_text="YYYY-MM, a closed month.",
                                   error_messages={"invalid": _lazy("month must look like 2026-10 (YYYY-MM).")})
    add = serializers.ListField(child=text_field(80), required=False, max_length=20,
                                help_text='GPUs to add per model (negative: remove), e.g. ["H100=8"].')
    quota = serializers.ListField(child=text_field(160), required=False, max_length=20,
                                  help_text='Quota limits to set, e.g. ["vision:H100=8", "nlp:H100=32"].')
    guarantee = serializers.ListField(child=text_field(160), required=False, max_length=20,
                                      help_text='Guarantees to set, e.g. ["nlp:H100=24"].')
    half_life_hours = number_field(0.001, 8760, required=False, help_text="The fair-share half-life in hours.")
    backfill = serializers.BooleanField(required=False, allow_null=True, default=None)
    preemption = serializers.BooleanField(required=False, allow_null=True, default=None)
    sizing = serializers.BooleanField(required=False, default=False,
                                      help_text="Instead of a change: the capacity advice's sizing of the month.")


class WhatIfRunSerializer(serializers.ModelSerializer):
    """A stored what-if run: its change, status and progress (0-1) and, once done, its figures (``result``:
    ``month``, ``change``, ``baseline``, ``changed``, ``actual`` each with ``total``, ``by_model``, ``by_tenant``,
    ``by_task_type`` of ``jobs``, ``median_wait_seconds``, ``p95_wait_seconds``, ``gpu_hours``, ``allocation``,
    ``preemptions``, ``never_started``; ``baseline_error`` and ``effects``)."""

    month = serializers.CharField(source="month_text", read_only=True, help_text="YYYY-MM.")
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = WhatIfRun
        fields = ["id", "month", "kind", "change", "status", "progress", "error", "created_by", "created",
                  "started_at", "finished_at", "result"]
        read_only_fields = fields


class WhatIfRunBriefSerializer(WhatIfRunSerializer):
    """A run in the list: everything but its figures (``GET /api/what-if/{id}/`` has them)."""

    class Meta(WhatIfRunSerializer.Meta):
        fields = [f for f in WhatIfRunSerializer.Meta.fields if f != "result"]
        read_only_fields = fields


class WhatIfListView(APIView):
    """The last 100 what-if runs, newest first, without their figures (managers and platform admins); ``POST``
    starts one in the background."""

    @extend_schema(responses={200: WhatIfRunBriefSerializer(many=True)})
    def get(self, request):
        _may_run_what_if(request.user)
        runs = WhatIfRun.objects.select_related("created_by").defer("result")[:100]
        return Response(WhatIfRunBriefSerializer(runs, many=True).data)

    @extend_schema(request=WhatIfRequestSerializer, responses={202: WhatIfRunSerializer}, examples=[
        OpenApiExample("Add one H100 node to October", request_only=True,
                       value={"month": "2026-10", "add": ["H100=8"]})])
    def post(self, request):
        _may_run_what_if(request.user)
        body = WhatIfRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            month = calendar_month(data["month"])
        except ValueError as exc:
            raise DjangoValidationError({"month": str(exc)}) from None
        change = parse_change(add=data.get("add", ()), quota=data.get("quota", ()),
                              guarantee=data.get("guarantee", ()), half_life_hours=data.get("half_life_hours"),
                              backfill=data.get("backfill"), preemption=data.get("preemption"))
        kind = WhatIfRun.Kind.SIZING if data.get("sizing") else WhatIfRun.Kind.CHANGE
        run = whatif.start(request.user, month, change, kind)
        run.refresh_from_db()
        return Response(WhatIfRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class WhatIfDetailView(APIView):
    """One what-if run with its figures once done (``status``, ``progress`` while it runs)."""

    @extend_schema(responses={200: WhatIfRunSerializer})
    def get(self, request, pk: int):
        _may_run_what_if(request.user)
        run = WhatIfRun.objects.select_related("created_by").filter(pk=pk).first()
        if run is None:
            raise NotFound(_("No what-if run #%(id)s.") % {"id": pk})
        return Response(WhatIfRunSerializer(run).data)


def _may_run_what_if(user) -> None:
    if not whatif.may_run(user):
        raise PermissionDenied(_("What-if runs are for managers and platform admins."))

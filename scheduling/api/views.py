from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.exceptions import ValidationError as ApiValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from gpuportal.api import IDEMPOTENCY_KEY, StandardPagination
from gpuportal.idempotency import idempotent

from .. import job_actions, job_tokens, progress, queries, submission
from ..filtersets import JobFilterSet
from ..models import Job, TaskType
from .serializers import (
    CancelSerializer,
    JobDetailSerializer,
    JobSerializer,
    JobSubmitSerializer,
    QuotaUseSerializer,
    TaskTypeSerializer,
)


def job_queryset(user):
    return Job.objects.visible_to(user).for_listing().with_placement()


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Jobs of the caller's tenants. Another tenant's job answers 404, as if it did not exist."""

    filterset_class = JobFilterSet
    serializer_class = JobSerializer

    def get_queryset(self):
        queryset = job_queryset(self.request.user)
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("events__actor")
        return queryset

    def get_serializer_class(self):
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer

    @extend_schema(request=JobSubmitSerializer, responses={201: JobDetailSerializer}, parameters=[IDEMPOTENCY_KEY])
    @idempotent
    def create(self, request):
        job = submission.submit_job(request.user, request.data)
        job = get_object_or_404(self.get_queryset().prefetch_related("events__actor"), pk=job.pk)
        return Response(JobDetailSerializer(job).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=CancelSerializer, responses={200: JobDetailSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        job = self.get_object()
        body = CancelSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job_actions.cancel_job(request.user, job, body.validated_data.get("reason", ""))
        job = get_object_or_404(self.get_queryset().prefetch_related("events__actor"), pk=job.pk)
        return Response(JobDetailSerializer(job).data)


    @extend_schema(request=None, responses={200: JobDetailSerializer})
    @action(detail=True, methods=["post"])
    def hold(self, request, pk=None):
        job_actions.set_hold(request.user, self.get_object(), hold=True)
        return Response(JobDetailSerializer(self.get_queryset().get(pk=pk)).data)

    @extend_schema(request=None, responses={200: JobDetailSerializer})
    @action(detail=True, methods=["post"])
    def release(self, request, pk=None):
        job_actions.set_hold(request.user, self.get_object(), hold=False)
        return Response(JobDetailSerializer(self.get_queryset().get(pk=pk)).data)


class QuotaUsageView(APIView):
    """Quota per tenant and GPU model with GPUs in use, for the caller's tenants."""

    @extend_schema(responses=QuotaUseSerializer(many=True))
    def get(self, request):
        paginator = StandardPagination()
        rows = queries.quota_usage(request.user)
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(QuotaUseSerializer(page, many=True).data)


class TaskTypeViewSet(viewsets.ReadOnlyModelViewSet):
    """Priority classes: their priority, whether they may be preempted or need approval."""

    queryset = TaskType.objects.all()
    serializer_class = TaskTypeSerializer
    lookup_field = "code"


class QueueView(APIView):
    """The cluster queue in order; other tenants' jobs show only their tenant, size and reason code."""

    def get(self, request):
        rows = [{"position": r["position"], "tenant": r["tenant"], "job": r["id"], "size": r["size"],
                 "task_type": r["task_type"], "priority": r["priority"], "wait_reason": r["reason"],
                 "message": r["message"] or None, "estimated_start": r["estimated_start"]}
                for r in queries.cluster_queue(request.user, request.query_params.get("cluster"))]
        paginator = StandardPagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(page)


class FairShareView(APIView):
    """Each tenant's weight, fair share, decayed usage (GPU-hours) and running GPUs."""

    def get(self, request):
        return Response([{"tenant": s.tenant, "weight": s.weight, "fair_share": round(s.fair_share, 4),
                          "usage_gpu_hours": s.usage_gpu_hours, "usage_share": round(s.usage_share, 4),
                          "running_gpus": s.running_gpus} for s in queries.fair_share_report()])


class JobReportView(APIView):
    """``POST /api/jobs/{id}/report/`` from inside a job: progress (``step``, ``total``, ``message``), a
    ``checkpoint`` (``path``, ``size_bytes``, ``step``) and ``artifacts`` (``name``, ``uri``, ``size_bytes``).
    Authenticated by the job's own token (``Authorization: Bearer $GPUPORTAL_JOB_TOKEN``), valid for that job
    while it runs; any other token, or an ended job, is 403."""

    authentication_classes: list = []
    permission_classes: list = []

    @extend_schema(request=None, responses={200: None})
    def post(self, request, pk):
        token = request.META.get("HTTP_AUTHORIZATION", "").removeprefix("Bearer ").strip()
        job = Job.objects.filter(pk=pk).first()
        if job is None or not job_tokens.verify(job, token):
            raise PermissionDenied("invalid or expired job token")
        try:
            job = progress.record_report(job, request.data)
        except ValidationError as exc:
            raise ApiValidationError(exc.message_dict) from None
        return Response({"job": job.pk, "step": job.progress_step, "total": job.progress_total,
                         "checkpoints": job.checkpoints.count(), "artifacts": job.artifacts.count()})

from collections.abc import Sequence

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import generics, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotAuthenticated, PermissionDenied
from rest_framework.response import Response

from gpuportal.storage import pagecache
from gpuportal.web.api import IDEMPOTENCY_KEY, CountedBy
from gpuportal.web.idempotency import idempotent
from gpuportal.web.serializers import planned_rows
from scheduling.api import rows
from scheduling.api.serializers import (
    CancelSerializer,
    FairShareSerializer,
    JobDetailSerializer,
    JobReportAnswerSerializer,
    JobReportSerializer,
    JobSerializer,
    JobSubmitSerializer,
    QueueRowSerializer,
    QuotaUseSerializer,
    TaskTypeSerializer,
    job_detail,
)
from scheduling.jobs import actions as job_actions
from scheduling.jobs import progress, queries, submission
from scheduling.jobs import tokens as job_tokens
from scheduling.jobs.filtersets import JobFilterSet
from scheduling.models import Job, JobEvent, TaskType

#: The schema's examples of a submission (Schemathesis sends them too).
SUBMIT_EXAMPLES = [
    OpenApiExample("One A100 for a research run", request_only=True, value={
        "project": "vision/detection", "task_type": "research", "gpu_model": "A100", "gpus_per_node": 1,
        "image": "registry.local/pytorch:2.4-cuda12", "command": "python train.py --epochs 10",
        "max_runtime_minutes": 120}),
    OpenApiExample("Two nodes of 8 H100 in one network domain", request_only=True, value={
        "tenant": "nlp", "project": "llm-pretrain", "name": "pretrain-7b", "task_type": "training",
        "gpu_model": "H100", "gpus_per_node": 8, "nodes": 2, "topology": "same_network_domain",
        "image": "registry.local/megatron:24.05", "command": "torchrun pretrain.py"}),
    OpenApiExample("A quarter of an L40S for a notebook", request_only=True, value={
        "task_type": "notebook", "gpu_model": "L40S", "gpus_per_node": 1, "gpu_share": 0.25,
        "image": "registry.local/jupyter:cuda12"}),
]


def job_queryset(user):
    return Job.objects.visible_to(user).for_listing().with_placement()


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Jobs of the caller's tenants. Another tenant's job answers 404, as if it did not exist."""

    filterset_class = JobFilterSet
    serializer_class = JobSerializer

    @property
    def error_statuses(self) -> tuple[str, ...]:
        """Hold and release answer 409 when the job left the waiting states meanwhile (gpuportal.web.conflicts)."""
        return ("409",) if self.action in ("hold", "release", "clear_avoidance") else ()

    def get_queryset(self):
        queryset = job_queryset(self.request.user)
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("events__actor")
        return queryset

    def get_serializer_class(self):
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer

    def list(self, request, *args, **kwargs):
        return pagecache.cached_api(request, "api-jobs", lambda: self._listing(request))

    def retrieve(self, request, *args, **kwargs):
        return Response(job_detail(self.get_object(), self.get_serializer_context()))

    def _listing(self, request) -> Response:
        """The page as ``JobSerializer`` gives it, read as plain values and each row kept by what it shows
        (``rows``): only the jobs whose rows are missing are built and serialised."""
        chosen = self.filter_queryset(self.get_queryset()).prefetch_related(None)
        shown = chosen.values_list(*rows.FIELDS)  # names over foreign keys and one-to-ones: one row per job
        page = self.paginate_queryset(CountedBy(shown, chosen))
        found = rows.page_rows(list(shown) if page is None else page, request, self._draw)
        return Response(found) if page is None else self.get_paginated_response(found)

    def _draw(self, ids: Sequence[int], depends: dict) -> dict[int, tuple[str, dict]]:
        """``rows.Draw``: the jobs ``ids`` serialised, each with the key of what its row shows."""
        jobs = list(self.get_queryset().select_related("cluster").filter(pk__in=ids))
        names = {job.cluster_id: job.cluster.name for job in jobs if job.cluster_id}  # what ``get_cluster`` asks
        data = planned_rows(JobSerializer, jobs, {**self.get_serializer_context(), "_depends_on": depends,
                                                  "_cluster_names": names})
        reader = rows.reader_of(self.request)
        return {job.pk: (rows.key(rows.shown_by(job), rows.held_by(job), depends[job.pk], reader), row)
                for job, row in zip(jobs, data, strict=True)}

    @extend_schema(request=JobSubmitSerializer, responses={201: JobDetailSerializer}, parameters=[IDEMPOTENCY_KEY],
                   examples=SUBMIT_EXAMPLES)
    @idempotent
    def create(self, request):
        lookups = submission.Lookups()  # the catalogue the body's schema reads is the one the rules read
        body = JobSubmitSerializer(data=request.data, context={"lookups": lookups})
        body.is_valid(raise_exception=True)
        # stored without reading it back: the answer is read once, after the commit (and the pass it ran, inline)
        job = submission.store_jobs(request.user, [submission.validate_job_request(
            request.user, body.validated_data, lookups)])[0][0]
        job = get_object_or_404(job_queryset(request.user).prefetch_related(
            Prefetch("events", JobEvent.objects.select_related("actor"))), pk=job.pk)
        return Response(job_detail(job), status=status.HTTP_201_CREATED)

    @extend_schema(request=CancelSerializer, responses={200: JobDetailSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        job = self.get_object()
        body = CancelSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job_actions.cancel_job(request.user, job, body.validated_data.get("reason", ""))
        job = get_object_or_404(self.get_queryset().prefetch_related("events__actor"), pk=job.pk)
        return Response(job_detail(job))

    @extend_schema(request=None, responses={200: JobDetailSerializer})
    @action(detail=True, methods=["post"])
    def hold(self, request, pk=None):
        job_actions.set_hold(request.user, self.get_object(), hold=True)
        return Response(job_detail(self.get_queryset().get(pk=pk)))

    @extend_schema(request=None, responses={200: JobDetailSerializer})
    @action(detail=True, methods=["post"])
    def release(self, request, pk=None):
        job_actions.set_hold(request.user, self.get_object(), hold=False)
        return Response(job_detail(self.get_queryset().get(pk=pk)))

    @extend_schema(request=None, responses={200: JobDetailSerializer})
    @action(detail=True, methods=["post"], url_path="clear-avoidance")
    def clear_avoidance(self, request, pk=None):
        """Platform admins: let a waiting job run again on the nodes its earlier attempts failed on."""
        job_actions.clear_avoidance(request.user, self.get_object())
        return Response(job_detail(self.get_queryset().get(pk=pk)))


class QuotaUsageView(generics.ListAPIView):
    """Quota per tenant and GPU model with GPUs in use, for the caller's tenants."""

    serializer_class = QuotaUseSerializer
    filter_backends: list = []

    def get_queryset(self):
        return queries.quota_usage(self.request.user)


class TaskTypeViewSet(viewsets.ReadOnlyModelViewSet):
    """Priority classes: their priority, whether they may be preempted or need approval."""

    queryset = TaskType.objects.all()
    serializer_class = TaskTypeSerializer
    lookup_field = "code"


class QueueView(generics.ListAPIView):
    """The cluster queue in order, with each job's place among those waiting for its GPU model; other tenants' jobs
    show only their tenant, size and reason (the sentence without who or which job)."""

    serializer_class = QueueRowSerializer
    filter_backends: list = []

    @extend_schema(parameters=[
        OpenApiParameter("cluster", str, required=False, description="Only the queue of this cluster (every "
                                                                     "cluster's when absent or unknown)."),
        OpenApiParameter("gpu_model", str, required=False, description="Only the jobs waiting for this GPU model "
                                                                       "(every model's when absent).")])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        params = self.request.query_params
        return [{"position": r["position"], "model_position": r["model_position"], "tenant": r["tenant"],
                 "job": r["id"], "size": r["size"], "gpu_model": r["gpu_model"], "task_type": r["task_type"],
                 "priority": r["priority"], "wait_reason": r["reason"], "message": r["message"] or None,
                 "estimated_start": r["estimated_start"], "earliest_start": r["earliest_start"],
                 "latest_start": r["latest_start"]}
                for r in queries.cluster_queue(self.request.user, params.get("cluster"), params.get("gpu_model"))]


class FairShareView(generics.ListAPIView):
    """Each tenant's weight, fair share, decayed usage (GPU-hours) and running GPUs (one list, not paged)."""

    serializer_class = FairShareSerializer
    filter_backends: list = []
    pagination_class = None

    def get_queryset(self):
        return [{"tenant": s.tenant, "weight": s.weight, "fair_share": round(s.fair_share, 4),
                 "usage_gpu_hours": s.usage_gpu_hours, "usage_share": round(s.usage_share, 4),
                 "running_gpus": s.running_gpus} for s in queries.fair_share_report()]


class JobReportView(generics.GenericAPIView):
    """``POST /api/jobs/{id}/report/`` from inside a job: progress (``step``, ``total``, ``message``), a
    ``checkpoint`` (``path``, ``size_bytes``, ``step``) and ``artifacts`` (``name``, ``uri``, ``size_bytes``).
    Authenticated by the job's own token (``Authorization: Bearer $GPUPORTAL_JOB_TOKEN``), valid for that job
    while it runs; any other token, or an ended job, is 403. Nothing is stored when a field is wrong."""

    authentication_classes: list = []
    permission_classes: list = []
    serializer_class = JobReportSerializer
    #: Statuses the schema lists beyond the defaults (gpuportal.web.schema): no token, a token that is not the job's.
    error_statuses = ("401", "403")
    error_descriptions = {"401": "No Authorization header: send the job's token.",
                          "403": "Not the token of this job's running attempt (or the job has ended)."}

    @extend_schema(responses={200: JobReportAnswerSerializer}, auth=[{"jobToken": []}], examples=[
        OpenApiExample("Progress and a checkpoint", request_only=True, value={
            "step": 12000, "total": 50000, "message": "epoch 4",
            "checkpoint": {"path": "/data/ckpt/12000.pt", "size_bytes": 2147483648, "step": 12000},
            "artifacts": [{"name": "metrics", "uri": "s3://runs/42/metrics.json"}]})])
    def post(self, request, pk):
        if not request.META.get("HTTP_AUTHORIZATION"):
            raise NotAuthenticated(_("Send the job's token: Authorization: Bearer $GPUPORTAL_JOB_TOKEN."))
        token = request.META["HTTP_AUTHORIZATION"].removeprefix("Bearer ").strip()
        job = Job.objects.filter(pk=pk).first()
        if job is None or not job_tokens.verify(job, token):
            raise PermissionDenied("invalid or expired job token")
        body = JobReportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job = progress.record_report(job, {k: v for k, v in body.validated_data.items() if v is not None})
        return Response(JobReportAnswerSerializer({
            "job": job.pk, "step": job.progress_step, "total": job.progress_total,
            "checkpoints": job.checkpoints.count(), "artifacts": job.artifacts.count()}).data)

    def get_authenticate_header(self, request):
        return "Bearer"  # a missing token is a 401 that says which scheme, not a 403

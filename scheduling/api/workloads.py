"""The API of services and arrays: read one, and operate it (scale, roll out, stop; cancel an array)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from gpuportal.web.api import text_field, whole_number_field
from scheduling.jobs.submission import FIELDS, MAX_REPLICAS
from scheduling.models import JobGroup
from scheduling.workloads import services as workloads
from scheduling.workloads.queries import group_view, service_url, visible_group


class ReplicaSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    replica = serializers.IntegerField()
    revision = serializers.IntegerField()
    status = serializers.CharField()
    ready = serializers.BooleanField(allow_null=True)
    restarts = serializers.IntegerField()
    problem = serializers.CharField(help_text="Why it is not ready (crash loop, failing readiness), or empty.")


class ServiceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    tenant = serializers.CharField()
    project = serializers.CharField()
    owner = serializers.CharField()
    image = serializers.CharField()
    revision = serializers.IntegerField()
    port = serializers.IntegerField()
    replicas = serializers.IntegerField(help_text="Replicas wanted.")
    ready_replicas = serializers.IntegerField(help_text="Replicas of the current revision that are ready.")
    rolling_out = serializers.BooleanField(help_text="Replicas of an older revision still run.")
    url = serializers.CharField(allow_null=True, help_text="Where the service answers through the portal.")
    stopped_at = serializers.DateTimeField(allow_null=True)
    members = ReplicaSerializer(many=True)


class TaskSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    index = serializers.IntegerField()
    status = serializers.CharField()


class ArraySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    tenant = serializers.CharField()
    project = serializers.CharField()
    owner = serializers.CharField()
    size = serializers.IntegerField()
    parallelism = serializers.IntegerField(allow_null=True)
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="Tasks per status.")
    tasks = TaskSerializer(many=True)


class ScaleSerializer(serializers.Serializer):
    replicas = whole_number_field(1, MAX_REPLICAS, help_text="Replicas wanted (within the tenant's quota).")


class RolloutSerializer(serializers.Serializer):
    image = text_field(FIELDS["image"].max_length, label=FIELDS["image"].label,
                       help_text="The new image; replicas of the new revision replace the old ones one by one.")


def _common(group: JobGroup) -> dict:
    return {"id": group.pk, "name": group.name, "tenant": group.tenant.name, "project": group.project.name,
            "owner": group.owner.username}


def service_data(request, group: JobGroup) -> dict:
    view = group_view(group)
    return {**_common(group), "image": group.image, "revision": group.revision, "port": group.port,
            "replicas": group.size, "ready_replicas": view.ready_replicas, "rolling_out": view.rolling_out,
            "url": None if group.stopped_at else request.build_absolute_uri(service_url(group.pk)),
            "stopped_at": group.stopped_at,
            "members": [{"job": m.job.pk, "replica": m.job.group_index, "revision": m.job.revision,
                         "status": m.job.status, "ready": m.live.ready, "restarts": m.live.restarts,
                         "problem": m.live.problem} for m in view.members]}


def array_data(group: JobGroup) -> dict:
    view = group_view(group, probe=False)
    return {**_common(group), "size": group.size, "parallelism": group.parallelism, "counts": view.counts,
            "tasks": [{"job": m.job.pk, "index": m.job.group_index, "status": m.job.status} for m in view.members]}


def _operate(request, pk, body_class, operation) -> Response:
    """Check the body, apply ``operation`` (a ``workloads`` service) to the service, answer its new state."""
    group = visible_group(request.user, pk, JobGroup.Kind.SERVICE)
    body = body_class(data=request.data)
    body.is_valid(raise_exception=True)
    return Response(service_data(request, operation(request.user, group, body.validated_data)))


class ServiceView(APIView):
    """An inference service of the caller's tenants: replicas wanted and ready, revision, endpoint."""

    @extend_schema(responses={200: ServiceSerializer})
    def get(self, request, pk):
        return Response(service_data(request, visible_group(request.user, pk, JobGroup.Kind.SERVICE)))


class ServiceScaleView(APIView):
    """Set the replicas wanted: added ones are scheduled like jobs, removed ones free their GPUs."""

    @extend_schema(request=ScaleSerializer, responses={200: ServiceSerializer})
    def post(self, request, pk):
        return _operate(request, pk, ScaleSerializer, workloads.scale_service)


class ServiceRolloutView(APIView):
    """Roll out a new image: new replicas start one at a time; old ones stop once new ones are ready."""

    @extend_schema(request=RolloutSerializer, responses={200: ServiceSerializer})
    def post(self, request, pk):
        return _operate(request, pk, RolloutSerializer, workloads.rollout_service)


class ServiceStopView(APIView):
    """Stop every replica; their GPUs are freed."""

    @extend_schema(request=None, responses={200: ServiceSerializer})
    def post(self, request, pk):
        group = visible_group(request.user, pk, JobGroup.Kind.SERVICE)
        return Response(service_data(request, workloads.stop_service(request.user, group)))


class ArrayView(APIView):
    """A job array of the caller's tenants: its tasks and how many are in each state."""

    @extend_schema(responses={200: ArraySerializer})
    def get(self, request, pk):
        return Response(array_data(visible_group(request.user, pk, JobGroup.Kind.ARRAY)))


class ArrayCancelView(APIView):
    """Cancel every task of the array that has not ended."""

    @extend_schema(request=None, responses={200: ArraySerializer})
    def post(self, request, pk):
        group = visible_group(request.user, pk, JobGroup.Kind.ARRAY)
        workloads.cancel_array(request.user, group)
        return Response(array_data(group))

"""``GET /api/jobs/{id}/efficiency/``: how well a job used the GPUs it held (``scheduling.jobs.efficiency``).

The job page's live chart and ``gpuportal efficiency`` read it. Visibility is the job detail's: a job the caller
may not see answers 404, as if it did not exist.
"""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduling.jobs.efficiency import Efficiency, efficiency_of
from scheduling.models import Job


class GpuSeriesSerializer(serializers.Serializer):
    gpu = serializers.CharField(source="name", help_text="node/gpuN")
    model = serializers.CharField()
    memory_total_mb = serializers.IntegerField(help_text="The GPU's memory in MiB.")
    time = serializers.ListField(source="times", child=serializers.DateTimeField(),
                                 help_text="The start of each bucket of `resolution_seconds`.")
    utilization = serializers.ListField(child=serializers.FloatField(allow_null=True),
                                        help_text="Mean utilisation in the bucket, 0-100.")
    memory_mb = serializers.ListField(child=serializers.IntegerField(allow_null=True),
                                      help_text="The most memory used in the bucket, MiB.")
    power_w = serializers.ListField(child=serializers.FloatField(allow_null=True),
                                    help_text="Mean power draw in the bucket, W.")


class IdleStretchSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    minutes = serializers.IntegerField()


class EfficiencySerializer(serializers.Serializer):
    """A job's use of its GPUs; figures are null where nothing was measured."""

    job = serializers.IntegerField(source="job_id")
    gpus_asked = serializers.FloatField()
    finished = serializers.BooleanField(help_text="False while the job runs or waits: the figures are so far.")
    gpu_hours_held = serializers.FloatField(help_text="Each GPU (or share) held, times how long.")
    mean_gpu_utilization = serializers.FloatField(allow_null=True, help_text="0-100, over every reading.")
    peak_memory_mb = serializers.IntegerField(allow_null=True, help_text="The most memory one of its GPUs used.")
    memory_total_mb = serializers.IntegerField(allow_null=True, help_text="The memory of the largest GPU it held.")
    idle_share = serializers.FloatField(allow_null=True, help_text="0-1: the share of readings below the idle "
                                                                   "threshold.")
    idle_below_pct = serializers.IntegerField(help_text="The idle threshold: a reading below this utilisation.")
    measured_share = serializers.FloatField(allow_null=True, help_text="0-1: the share of the held time with "
                                                                       "readings.")
    most_gpus_working = serializers.IntegerField(allow_null=True, help_text="The most GPUs working at once.")
    readings = serializers.IntegerField()
    resolution_seconds = serializers.IntegerField(help_text="The width of one bucket of the series.")
    idle_stretches = IdleStretchSerializer(many=True)
    hint = serializers.CharField(allow_blank=True, help_text="Advice where the readings make it clear, else empty.")
    series = GpuSeriesSerializer(many=True, help_text="Per GPU: time, utilisation, memory and power.")


def efficiency_data(efficiency: Efficiency) -> dict:
    """The answer's JSON (also embedded in the job page, which draws the same data)."""
    return EfficiencySerializer(efficiency).data


class JobEfficiencyView(APIView):
    """The readings of the GPUs the job held and their summary; so far while it runs."""

    @extend_schema(responses={200: EfficiencySerializer})
    def get(self, request, pk):
        job = get_object_or_404(Job.objects.visible_to(request.user), pk=pk)
        return Response(efficiency_data(efficiency_of(job)))

"""``GET /api/jobs/{id}/log/?tail=N``: the last lines of a job's log, from whichever executor ran it.

The job page's refresh script and the command-line client read it. Visibility is the job detail's: a job
the caller may not see answers 404, as if it did not exist.
"""

from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from gpuportal.web.validation import whole_number
from scheduling.executors import read_job_log
from scheduling.executors.logs import DEFAULT_TAIL, MAX_TAIL, kept_log
from scheduling.jobs.attempts import current_attempt
from scheduling.models import Job


class JobLogSerializer(serializers.Serializer):
    """The last lines of one attempt of a job."""

    job = serializers.IntegerField(help_text="The job's id.")
    attempt = serializers.IntegerField(help_text="Which run the lines come from: 1 for the first, one more for each "
                                                 "retry or requeue.")
    lines = serializers.ListField(child=serializers.CharField(allow_blank=True),
                                  help_text="The last lines, oldest first; a gang's lines start with [pod i]. Empty "
                                            "when the attempt has not printed anything yet or its log is gone.")
    complete = serializers.BooleanField(help_text="True once the job has ended: the log will not grow any more.")


class LogUnavailableSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What the cluster answered, or why it could not be asked.")


class ClusterUnreachable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The cluster could not be asked for the log; try again later."
    default_code = "cluster_unreachable"


ATTEMPT = OpenApiParameter("attempt", {"type": "integer", "minimum": 1, "maximum": 100000}, OpenApiParameter.QUERY,
                           required=False, description="Which attempt (1 for the first; the job's `attempts` list "
                                                       "them). Absent: the current one (or the last, while it "
                                                       "waits for the next). An earlier attempt's lines are those "
                                                       "the portal kept when it ended; none when its log is gone.")
TAIL = OpenApiParameter("tail", {"type": "integer", "minimum": 1, "maximum": MAX_TAIL, "default": DEFAULT_TAIL},
                        OpenApiParameter.QUERY, required=False, description="How many of the last lines.")


def tail_of(query) -> int:
    """The ``tail`` parameter: a whole number from 1 to MAX_TAIL, given once, DEFAULT_TAIL when absent; a 400
    naming it otherwise."""
    if query.get("tail") in (None, ""):
        return DEFAULT_TAIL
    errors: dict[str, str] = {}
    if len(query.getlist("tail")) > 1:
        raise ValidationError({"tail": [_("Give %(name)s once.") % {"name": "tail"}]})
    tail = whole_number(errors, query, "tail", 1, MAX_TAIL, "tail")
    if errors:
        raise ValidationError({field: [message] for field, message in errors.items()})
    return tail


def attempt_of(query) -> int | None:
    """The ``attempt`` parameter: a whole number from 1, given once; None when absent; a 400 naming it otherwise."""
    if query.get("attempt") in (None, ""):
        return None
    errors: dict[str, str] = {}
    if len(query.getlist("attempt")) > 1:
        raise ValidationError({"attempt": [_("Give %(name)s once.") % {"name": "attempt"}]})
    number = whole_number(errors, query, "attempt", 1, 100000, "attempt")
    if errors:
        raise ValidationError({field: [message] for field, message in errors.items()})
    return number


class JobLogView(APIView):
    """The last lines of the job's current attempt (or of its last one, while it waits for a retry), or of an
    earlier attempt (``attempt``; 404 when the job has no such attempt). 503 when the job's cluster cannot be
    asked."""


    @extend_schema(parameters=[TAIL, ATTEMPT], responses={200: JobLogSerializer, 503: OpenApiResponse(
        LogUnavailableSerializer, description="The job's cluster could not be asked for the log (unreachable, or "
                                              "it refused); try again later.")})
    def get(self, request, pk):
        job = get_object_or_404(Job.objects.visible_to(request.user).select_related("cluster"), pk=pk)
        tail = tail_of(request.query_params)
        number = attempt_of(request.query_params)
        if number is None or number == current_attempt(job):
            log = read_job_log(job, tail)
        else:
            log = kept_log(job, number, tail)
            if log is None:
                raise NotFound(_("Job #%(job)d has no attempt %(n)d.") % {"job": job.pk, "n": number})
        if log.error:
            raise ClusterUnreachable(_("The log could not be read: %(error)s") % {"error": log.error})
        return Response(JobLogSerializer({"job": job.pk, "attempt": log.attempt, "lines": list(log.lines),
                                          "complete": job.is_terminal}).data)

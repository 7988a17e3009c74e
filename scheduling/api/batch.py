"""``POST /api/jobs/batch/``: up to ``MAX_BATCH_JOBS`` job specs in one call, all stored or none.

Why a call of its own: a sweep of 1,000 jobs sent one by one costs 1,000 requests, each reading the same
project, task type, catalogue and quota and each asking for a pass. Here every spec is the body of a single
submission (``JobSubmitSerializer``, so the two cannot disagree), checked by the same rules
(``submission.validate_batch``), stored by the same write in one transaction (``submission.store_jobs``) and
followed by one pass. A spec the schema refuses answers 400, one a rule refuses 422, each naming
``jobs.<index>.<field>``; then nothing is stored.
"""

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from gpuportal.web.api import IDEMPOTENCY_KEY, RequestSerializer
from gpuportal.web.idempotency import idempotent
from scheduling.api.serializers import JobSubmitSerializer
from scheduling.jobs import submission
from scheduling.jobs.limits import MAX_BATCH_JOBS


class JobSpecList(serializers.ListField):
    """The specs, each checked by one ``JobSubmitSerializer`` whose fields (the task types and GPU models the
    portal has) are read once for the whole list; a spec with a batch script gets a serializer of its own, since
    the script may give the fields the others must send."""

    def run_child_validation(self, data):
        if self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)  # before, not after, checking every spec
        result, errors = [], {}
        for index, item in enumerate(data):
            try:
                result.append(self._validated(item))
            except serializers.ValidationError as exc:
                errors[index] = exc.detail
        if errors:
            raise serializers.ValidationError(errors)
        return result

    def _validated(self, item):
        script = item.get("sbatch") if isinstance(item, dict) else None
        if not (isinstance(script, str) and script.strip()):
            return self.child.run_validation(item)
        body = JobSubmitSerializer(data=item, context=self.context)
        body.is_valid(raise_exception=True)
        return body.validated_data


class JobBatchSerializer(RequestSerializer):
    """What `POST /api/jobs/batch/` takes: up to 1,000 jobs, each the body of `POST /api/jobs/`."""

    jobs = JobSpecList(child=JobSubmitSerializer(), min_length=1, max_length=MAX_BATCH_JOBS, help_text=(
        "The jobs, each with the fields of POST /api/jobs/ (an array or a service counts as one)."))


class BatchJobSerializer(serializers.Serializer):
    ids = serializers.ListField(child=serializers.IntegerField(), help_text="The jobs stored for this spec: one, "
                                                                            "or an array's tasks, a service's "
                                                                            "replicas.")
    group = serializers.IntegerField(allow_null=True, help_text="The array or service; null for a single job.")


class BatchAnswerSerializer(serializers.Serializer):
    created = serializers.IntegerField(help_text="Jobs stored in all.")
    jobs = BatchJobSerializer(many=True, help_text="One entry per spec, in the order sent.")


class JobBatchView(APIView):
    """Submit up to 1,000 jobs at once: all are stored, or none (400 or 422 naming ``jobs.<index>.<field>``)."""

    @extend_schema(request=JobBatchSerializer, responses={201: BatchAnswerSerializer}, parameters=[IDEMPOTENCY_KEY],
                   examples=[OpenApiExample("Two research runs", request_only=True, value={"jobs": [
                       {"project": "vision/detection", "task_type": "research", "gpu_model": "A100",
                        "gpus_per_node": 1, "image": "registry.local/pytorch:2.4-cuda12",
                        "command": f"python train.py --seed {seed}"} for seed in (1, 2)]})])
    @idempotent
    def post(self, request):
        lookups = submission.Lookups()  # read once for the schema of every spec and for the rules
        body = JobBatchSerializer(data=request.data, context={"lookups": lookups})
        body.is_valid(raise_exception=True)
        stored = submission.store_jobs(request.user, submission.validate_batch(
            request.user, body.validated_data["jobs"], lookups))
        return Response(BatchAnswerSerializer({
            "created": sum(len(jobs) for jobs in stored),
            "jobs": [{"ids": [job.pk for job in jobs], "group": jobs[0].group_id} for jobs in stored]}).data,
            status=status.HTTP_201_CREATED)

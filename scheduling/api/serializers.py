from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from gpuportal.serializers import CompiledRepresentationMixin

from ..models import Job, JobEvent, TaskType
from ..submission import SUBMIT_FIELDS, SubmitField


class ReasonSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()


class FailureSerializer(serializers.Serializer):
    category = serializers.CharField()
    message = serializers.CharField()
    advice = serializers.CharField(help_text="What to do next.")
    node = serializers.CharField(help_text="The node concerned, when there is one.")
    evidence = serializers.DictField(help_text="Reason strings, exit code, the last log lines.")


class PlacementSerializer(serializers.Serializer):
    node = serializers.CharField()
    gpus = serializers.ListField(child=serializers.IntegerField())


class JobEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", default=None, read_only=True)

    class Meta:
        model = JobEvent
        fields = ["at", "kind", "from_status", "to_status", "reason", "actor", "data"]


class JobSerializer(CompiledRepresentationMixin, serializers.ModelSerializer):
    """A job as every client sees it; `nodes` is the node count."""

    tenant = serializers.CharField(source="tenant.name", read_only=True)
    project = serializers.CharField(source="project.name", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    task_type = serializers.CharField(source="task_type.code", read_only=True)
    nodes = serializers.IntegerField(source="node_count", read_only=True)
    total_gpus = serializers.FloatField(read_only=True)
    wait_reason = serializers.SerializerMethodField()
    failure = serializers.SerializerMethodField()
    placement = serializers.SerializerMethodField()
    gpu_share = serializers.FloatField(read_only=True)
    queue_position = serializers.IntegerField(read_only=True, allow_null=True)
    tenant_queue_position = serializers.IntegerField(read_only=True, allow_null=True)
    estimated_start = serializers.DateTimeField(read_only=True, allow_null=True)
    cpus_per_node = serializers.SerializerMethodField()
    memory_gb_per_node = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "id", "tenant", "project", "owner", "name", "task_type", "priority", "gpu_model", "gpus_per_node",
            "nodes", "total_gpus", "gpu_share", "topology", "cpus_per_node", "memory_gb_per_node", "image", "command",
            "max_runtime_minutes", "status", "queue_position", "tenant_queue_position", "wait_reason",
            "estimated_start", "failure", "exit_code", "placement", "held_by", "retry_count",
            "requeue_on_preemption", "submitted_at", "admitted_at", "started_at", "finished_at",
        ]
        read_only_fields = fields

    @extend_schema_field(ReasonSerializer(allow_null=True))
    def get_wait_reason(self, job):
        if not job.is_waiting or not job.wait_reason:
            return None
        return {"code": job.wait_reason, "message": job.wait_reason_message}

    def get_cpus_per_node(self, job) -> float:
        return job.cpu_milli / 1000

    def get_memory_gb_per_node(self, job) -> float:
        return round(job.memory_mib / 1024, 3)

    @extend_schema_field(FailureSerializer(allow_null=True))
    def get_failure(self, job):
        if not job.failure_category and not job.failure_message:
            return None
        diagnosis = (job.executor_state or {}).get("diagnosis") or {}
        return {"category": job.failure_category or None, "message": job.failure_message,
                "advice": diagnosis.get("advice", ""), "node": diagnosis.get("node", ""),
                "evidence": diagnosis.get("evidence", {})}

    @extend_schema_field(PlacementSerializer(many=True))
    def get_placement(self, job):
        per_node: dict[str, list[int]] = {}
        for gpu in job.held_gpus():
            per_node.setdefault(gpu.node.name, []).append(gpu.index)
        return [{"node": node, "gpus": gpus} for node, gpus in per_node.items()]


class JobDetailSerializer(JobSerializer):
    events = JobEventSerializer(many=True, read_only=True)

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "events"]
        read_only_fields = fields


def _submit_field(spec: SubmitField) -> serializers.Field:
    common = {"required": spec.required, "help_text": spec.help_text}
    if spec.kind == "int":
        return serializers.IntegerField(min_value=spec.min_value, max_value=spec.max_value, **common)
    if spec.kind == "float":
        return serializers.FloatField(min_value=spec.min_value, max_value=spec.max_value, **common)
    if spec.kind == "choice":
        return serializers.ChoiceField(choices=[value for value, _label in spec.choices], **common)
    if spec.kind == "bool":
        return serializers.BooleanField(**common)
    return serializers.CharField(max_length=spec.max_length, allow_blank=not spec.required, **common)


#: What `POST /api/jobs/` takes, for the OpenAPI schema: built from ``submission.SUBMIT_FIELDS``, the same
#: declaration as the page's form; ``submission.validate_job_request`` checks it.
JobSubmitSerializer = type("JobSubmitSerializer", (serializers.Serializer,), {
    "__doc__": "What `POST /api/jobs/` takes (one declaration with the submit form).",
    **{spec.name: _submit_field(spec) for spec in SUBMIT_FIELDS}})


class CancelSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500)


class QuotaUseSerializer(serializers.Serializer):
    tenant = serializers.CharField()
    gpu_model = serializers.CharField()
    guaranteed = serializers.IntegerField()
    limit = serializers.IntegerField(help_text="Effective limit: the configured limit plus bursts active now.")
    burst = serializers.IntegerField(help_text="Extra GPUs of the bursts active now (included in limit).")
    used = serializers.IntegerField(help_text="GPUs held; a share of a GPU counts as one.")
    queued = serializers.IntegerField(help_text="GPUs asked for by the tenant's queued jobs.")


class TaskTypeSerializer(serializers.ModelSerializer):
    class Meta:
        model = TaskType
        fields = ["code", "name", "priority", "preemptible", "requires_approval", "default_max_runtime_minutes",
                  "cpu_milli_per_gpu", "memory_mib_per_gpu"]

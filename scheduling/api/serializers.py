from dataclasses import asdict

from django.core.exceptions import ValidationError as DjangoValidationError
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from fleet.catalogue import gpu_model_catalogue
from fleet.models import Cluster
from gpuportal.web.api import RequestSerializer, choose_from, number_field, text_field, whole_number_field
from gpuportal.web.serializers import CompiledRepresentationMixin, planned_rows
from scheduling.engine.reasons import WaitReason
from scheduling.jobs import progress, sbatch
from scheduling.jobs.attempts import attempts_of, visible_job_ids
from scheduling.jobs.dependencies import depends_on_of
from scheduling.jobs.limits import CANCEL_REASON_MAX, MAX_ID
from scheduling.jobs.submission import SUBMIT_FIELDS, Lookups, SubmitField
from scheduling.models import (
    AttemptOutcome,
    DependencyCondition,
    FailureCategory,
    Job,
    JobEvent,
    TaskType,
    WorkloadKind,
)
from scheduling.workloads.queries import group_view, job_url, port_links


class ReasonSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()


class FailureSerializer(serializers.Serializer):
    category = serializers.CharField()
    message = serializers.CharField()
    advice = serializers.CharField(help_text="What to do next.")
    node = serializers.CharField(help_text="The node concerned, when there is one.")
    evidence = serializers.DictField(help_text="Reason strings, exit code, the last log lines.")


class NamedPortSerializer(serializers.Serializer):
    name = serializers.CharField()
    port = serializers.IntegerField()
    url = serializers.CharField(allow_null=True, help_text="Where it opens through the portal while the job runs.")


class DependsOnSerializer(serializers.Serializer):
    job = serializers.IntegerField(help_text="The job it waits for (an array's first task: the whole array).")
    condition = serializers.ChoiceField(choices=DependencyCondition.choices)
    satisfied = serializers.BooleanField(help_text="Whether that job ended as the condition asks.")


class PlacementSerializer(serializers.Serializer):
    node = serializers.CharField()
    gpus = serializers.ListField(child=serializers.IntegerField())


#: Keys of an event's data that name another job and its owner, by the key of that job: a preemption crosses
#: tenants, so they are shown only to a reader who may see that job (the stored sentence names its tenant only).
CROSS_JOB_KEYS = {"preemptor": ("preemptor", "preemptor_owner"), "victim": ("victim", "victim_owner")}


class JobEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", default=None, read_only=True, allow_null=True,
                                  help_text="Who caused it; null for the portal itself.")
    data = serializers.SerializerMethodField(help_text="What the portal kept beside the event. Another job named "
                                                       "by a preemption (its id, its owner) only when the caller "
                                                       "may see that job.")

    class Meta:
        model = JobEvent
        fields = ["at", "kind", "from_status", "to_status", "reason", "actor", "data"]

    def get_data(self, event) -> dict:
        data = dict(event.data or {})
        named = {key: data[key] for key in CROSS_JOB_KEYS if key in data}
        if not named:
            return data
        request = self.context.get("request")
        reader = request.user if request is not None else None
        seen = self.context.setdefault("_visible_jobs", {})  # one look-up per job named in a response
        unknown = [job for job in named.values() if isinstance(job, int) and job not in seen]
        if unknown:
            visible = visible_job_ids(reader, unknown)
            seen.update({job: job in visible for job in unknown})
        for key, job in named.items():
            if not (isinstance(job, int) and seen.get(job, False)):
                for hidden in CROSS_JOB_KEYS[key]:
                    data.pop(hidden, None)
        return data


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
    earliest_start = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="The likely start range's beginning (null: unknown).")
    latest_start = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="The likely start range's end: calibrated on trace replays so "
                                                   "that most jobs start between the two (docs/scheduling.md).")
    cpus_per_node = serializers.SerializerMethodField()
    memory_gb_per_node = serializers.SerializerMethodField()
    kind = serializers.ChoiceField(choices=WorkloadKind.choices, read_only=True)
    url = serializers.SerializerMethodField(help_text="Where a running notebook opens, or a replica's service "
                                                      "answers, through the portal; null for other jobs.")
    replicas = serializers.SerializerMethodField(help_text="Services: the replicas wanted; null otherwise.")
    ready_replicas = serializers.SerializerMethodField(
        help_text="Services: replicas of the current revision answering their readiness check; null otherwise.")
    group = serializers.IntegerField(source="group_id", read_only=True, allow_null=True,
                                     help_text="The array or service this job belongs to.")
    array_index = serializers.SerializerMethodField(help_text="Array tasks: the task's index; null otherwise.")
    template_version = serializers.IntegerField(source="template_version_id", read_only=True, allow_null=True)
    cluster = serializers.SerializerMethodField(
        help_text="The name of the cluster the scheduler placed the job on; null until it is placed (and again "
                  "while a preempted or retried job waits).")
    external_id = serializers.SerializerMethodField(
        help_text="The job's name on its cluster: the Slurm job id (as a string) or the Kubernetes Job's name; "
                  "null until it is dispatched, and on a simulated cluster.")
    depends_on = serializers.SerializerMethodField(
        help_text="The jobs it waits for (submitted as `depends_on`), each with its condition and whether it is met.")
    ports = serializers.SerializerMethodField(
        help_text="The ports it declared; `url` opens one through the portal (on the workload origin) while the job "
                  "runs, null otherwise.")

    class Meta:
        model = Job
        fields = [
            "id", "kind", "url", "replicas", "ready_replicas", "group", "array_index", "template_version",
            "tenant", "project", "owner", "name", "task_type", "priority", "gpu_model", "accept_models",
            "gpus_per_node",
            "nodes", "total_gpus", "gpu_share", "topology", "cpus_per_node", "memory_gb_per_node", "image", "command",
            "max_runtime_minutes", "status", "queue_position", "tenant_queue_position", "wait_reason",
            "estimated_start", "earliest_start", "latest_start", "failure", "exit_code", "placement", "held_by",
            "retry_count", "requeue_on_preemption", "submitted_at", "admitted_at", "started_at", "finished_at",
            "cluster", "external_id", "ports", "depends_on", "mail_type",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "admitted_at": {"help_text": "When the current attempt was admitted; null while the job waits (a requeued "
                                         "job's earlier runs are in the job detail's `attempts`)."},
            "started_at": {"help_text": "When the current attempt's program started; null until it runs."}}

    @extend_schema_field(ReasonSerializer(allow_null=True))
    def get_wait_reason(self, job):
        if not job.is_waiting or not job.wait_reason:
            return None
        return {"code": job.wait_reason, "message": job.wait_reason_message}

    def get_url(self, job) -> str | None:
        path = job_url(job)
        request = self.context.get("request")
        return request.build_absolute_uri(path) if path and request is not None else path

    def get_replicas(self, job) -> int | None:
        return job.group.size if job.kind == WorkloadKind.SERVICE and job.group_id else None

    def get_ready_replicas(self, job) -> int | None:
        if job.kind != WorkloadKind.SERVICE or not job.group_id:
            return None
        ready = self.context.setdefault("_ready_replicas", {})  # one probe of a service per response
        if job.group_id not in ready:
            ready[job.group_id] = group_view(job.group).ready_replicas
        return ready[job.group_id]

    def get_cluster(self, job) -> str | None:
        if job.cluster_id is None:
            return None
        names = self.context.get("_cluster_names")
        if names is None or job.cluster_id not in names:  # one query per response, not one per job
            names = self.context["_cluster_names"] = dict(Cluster.objects.values_list("pk", "name"))
        return names.get(job.cluster_id)

    def get_external_id(self, job) -> str | None:
        """What the cluster calls the job: the executor wrote it into ``executor_state`` when it dispatched."""
        state = job.executor_state or {}
        found = state.get("slurm_job_id") or state.get("object")
        return None if found in (None, "") else str(found)

    @extend_schema_field(NamedPortSerializer(many=True))
    def get_ports(self, job) -> list[dict]:
        request = self.context.get("request")
        return [{**port, "url": request.build_absolute_uri(url) if url and request is not None else url}
                for port, url in port_links(job)]

    @extend_schema_field(DependsOnSerializer(many=True))
    def get_depends_on(self, job) -> list[dict]:
        """Read for every job of a list at once (two queries per response, not two per job)."""
        known = self.context.setdefault("_depends_on", {})
        if job.pk not in known:
            listed = getattr(self.parent, "instance", None)
            ids = [row.pk for row in listed] if isinstance(listed, list) else []
            known.update(depends_on_of(ids if job.pk in ids else [job.pk]))
        return known[job.pk]

    def get_array_index(self, job) -> int | None:
        return job.group_index if job.kind == WorkloadKind.ARRAY else None

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


class AttemptSerializer(serializers.Serializer):
    """One run of the job, from its admission to the moment it let its GPUs go."""

    number = serializers.IntegerField(help_text="1 for the first run; one more for each retry or requeue.")
    current = serializers.BooleanField(help_text="True for the attempt that holds GPUs now.")
    admitted_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True, help_text="When its program started; null if it never "
                                                                      "did.")
    ended_at = serializers.DateTimeField(allow_null=True, help_text="Null while it holds its GPUs.")
    run_seconds = serializers.FloatField(allow_null=True, help_text="From its start to its end (or now).")
    nodes = PlacementSerializer(many=True, source="placement", help_text="Where it ran: each node's GPU indices.")
    outcome = serializers.ChoiceField(choices=[*AttemptOutcome.values, ""], allow_blank=True,
                                      help_text="How it ended; empty while it holds its GPUs.")
    failure_category = serializers.ChoiceField(choices=[*FailureCategory.values, ""], allow_blank=True)
    reason = serializers.CharField(allow_blank=True, help_text="Why it ended, in the caller's language; another "
                                                               "tenant's job is named by its tenant only.")
    preempted_by = serializers.IntegerField(allow_null=True, help_text="The job that preempted it, when the caller "
                                                                       "may see that job.")
    requeued = serializers.BooleanField(help_text="The job went back to the queue after it.")
    log_url = serializers.CharField(help_text="Its log: GET it (an earlier attempt's: the lines the portal kept).")


class JobDetailSerializer(JobSerializer):
    events = JobEventSerializer(many=True, read_only=True)
    attempts = serializers.SerializerMethodField(help_text="Every run of the job, oldest first.")

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "events", "attempts"]
        read_only_fields = fields

    @extend_schema_field(AttemptSerializer(many=True))
    def get_attempts(self, job):
        request = self.context.get("request")
        log, reader = reverse("job-log", args=[job.pk]), request.user if request is not None else None
        return AttemptSerializer([{**asdict(row), "log_url": f"{log}?attempt={row.number}"}
                                  for row in attempts_of(job, reader)], many=True).data


def job_detail(job, context: dict | None = None) -> dict:
    """``JobDetailSerializer(job, context=context).data`` by this thread's planned serializer
    (``gpuportal.web.serializers.planned_rows``): DRF built its sixty fields again for every answer, a tenth of a
    submission's CPU."""
    return planned_rows(JobDetailSerializer, [job], dict(context or {}))[0]


#: Bounds of the submit fields the declaration leaves open (they depend on the fleet: the service answers 422
#: past what the GPU model's nodes have); PostgreSQL's integer for whole numbers.
OPEN_INT_MAX = MAX_ID
OPEN_FLOAT_MAX = 1e9


def _submit_field(spec: SubmitField) -> serializers.Field:
    optional = {} if spec.required or spec.default is None else {"default": spec.default}
    common = {"required": spec.required, "help_text": spec.help_text, **optional}
    nullable = not spec.required and spec.default is None
    if spec.kind == "int":
        return whole_number_field(int(spec.min_value or 0), int(spec.max_value or OPEN_INT_MAX), allow_null=nullable,
                                  **common)
    if spec.kind == "float":
        return number_field(spec.min_value or 0, spec.max_value or OPEN_FLOAT_MAX, allow_null=nullable, **common)
    if spec.kind == "choice":
        return serializers.ChoiceField(choices=[value for value, _label in spec.choices], **common)
    if spec.kind == "bool":
        return serializers.BooleanField(**common)
    if spec.kind == "list":
        return serializers.ListField(child=text_field(spec.max_length, label=spec.label), required=False,
                                     max_length=int(spec.max_value), help_text=spec.help_text, error_messages={
                                         "max_length": gettext_lazy("At most {max_length} entries.")})
    return text_field(spec.max_length, blank=not spec.required, label=spec.label, allow_null=nullable, **common)


class JobSubmitFields(RequestSerializer):
    """The task type and GPU model are those the portal has when asked (the schema lists them). A view that
    validates the submission next passes its ``submission.Lookups`` as the context's ``lookups``: the catalogue
    read here is then the one the rules read."""

    def get_fields(self):
        fields = super().get_fields()
        lookups = self.context.get("lookups") or Lookups()
        choose_from(fields, "task_type", TaskType.objects.values_list("code", flat=True), _("task type"))
        choose_from(fields, "gpu_model", lookups.get(("catalogue",), gpu_model_catalogue), _("GPU model"))
        if self._scripted():  # a batch script's --gres / --gpus may give them
            for name in ("gpu_model", "gpus_per_node"):
                if name in fields:
                    fields[name].required = False
        return fields

    def _scripted(self) -> bool:
        data = getattr(self, "initial_data", None)
        return isinstance(data, dict) and isinstance(data.get("sbatch"), str) and bool(data["sbatch"].strip())

    def validate(self, attrs):
        """With a batch script, a field counts as set only when the body sends it (a default is left to the
        script), and the script's problems and its disagreements with the body are refused here (400)."""
        if not self._scripted():
            return attrs
        attrs = {name: value for name, value in attrs.items() if name in self.initial_data}
        try:
            scripted = sbatch.apply_script(attrs)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        if scripted is not None and scripted.conflicts:
            raise serializers.ValidationError({name: [text] for name, text in scripted.conflicts.items()})
        return attrs


#: What `POST /api/jobs/` takes: built from ``submission.SUBMIT_FIELDS`` (one declaration with the submit form);
#: ``submission.validate_job_request`` then applies the rules that depend on the fleet and the caller (422).
JobSubmitSerializer = type("JobSubmitSerializer", (JobSubmitFields,), {
    "__doc__": "What `POST /api/jobs/` takes (one declaration with the submit form).", "__module__": __name__,
    **{spec.name: _submit_field(spec) for spec in SUBMIT_FIELDS}})


class CancelSerializer(RequestSerializer):
    reason = text_field(CANCEL_REASON_MAX, required=False, blank=True, help_text="Why; shown on the job's timeline.")


class CheckpointReportSerializer(RequestSerializer):
    path = text_field(progress.MAX_CHECKPOINT_PATH, help_text="Where the checkpoint is, e.g. /data/ckpt/12000.pt.")
    size_bytes = whole_number_field(0, progress.MAX_COUNT, required=False, allow_null=True)
    step = whole_number_field(0, progress.MAX_COUNT, required=False, allow_null=True,
                              help_text="The step it was taken at; the report's step when left out.")


class ArtifactReportSerializer(RequestSerializer):
    name = text_field(progress.MAX_ARTIFACT_NAME, help_text="Reporting a name again replaces its URI.")
    uri = text_field(progress.MAX_ARTIFACT_URI)
    size_bytes = whole_number_field(0, progress.MAX_COUNT, required=False, allow_null=True)


class JobReportSerializer(RequestSerializer):
    """What a running job reports about itself (``POST /api/jobs/{id}/report/``); every field is optional."""

    step = whole_number_field(0, progress.MAX_COUNT, required=False, allow_null=True,
                              help_text="Steps done (at most total).")
    total = whole_number_field(0, progress.MAX_COUNT, required=False, allow_null=True, help_text="Steps in all.")
    message = text_field(progress.MAX_MESSAGE, required=False, blank=True, help_text="A line for the job page.")
    checkpoint = CheckpointReportSerializer(required=False, allow_null=True)
    artifacts = serializers.ListField(child=ArtifactReportSerializer(), required=False,
                                      max_length=progress.MAX_ARTIFACTS_PER_REPORT,
                                      help_text=f"At most {progress.MAX_ARTIFACTS_PER_REPORT} a report.")

    def validate(self, attrs):
        if attrs.get("step") is not None and attrs.get("total") is not None and attrs["step"] > attrs["total"]:
            raise serializers.ValidationError({"step": _("step (%(s)d) is beyond total (%(t)d).") % {
                "s": attrs["step"], "t": attrs["total"]}})
        return attrs


class JobReportAnswerSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    step = serializers.IntegerField(allow_null=True)
    total = serializers.IntegerField(allow_null=True)
    checkpoints = serializers.IntegerField(help_text="Checkpoints reported so far.")
    artifacts = serializers.IntegerField(help_text="Artifacts reported so far.")


class QueueRowSerializer(serializers.Serializer):
    """One waiting job of the cluster queue; another tenant's job shows only its tenant, size and reason."""

    position = serializers.IntegerField(allow_null=True, help_text="Place in its cluster's queue, every GPU model "
                                                                   "counted.")
    model_position = serializers.IntegerField(help_text="Place among the jobs waiting for the same GPU model: the "
                                                        "order in which that model's GPUs go.")
    tenant = serializers.CharField()
    job = serializers.IntegerField(allow_null=True, help_text="The job's id; null for another tenant's job.")
    size = serializers.CharField(help_text="Nodes x GPUs and model, e.g. 2 x 8 H100.")
    gpu_model = serializers.CharField()
    task_type = serializers.CharField()
    priority = serializers.IntegerField()
    wait_reason = serializers.ChoiceField(choices=[*WaitReason, ""], allow_blank=True)
    message = serializers.CharField(allow_null=True, help_text="Why it waits, in a sentence in the caller's "
                                                               "language; for another tenant's job without who or "
                                                               "which job; null before the first pass.")
    estimated_start = serializers.DateTimeField(allow_null=True)
    earliest_start = serializers.DateTimeField(allow_null=True, help_text="The likely start range: its beginning.")
    latest_start = serializers.DateTimeField(allow_null=True, help_text="The likely start range: its end.")


class FairShareSerializer(serializers.Serializer):
    tenant = serializers.CharField()
    weight = serializers.FloatField()
    fair_share = serializers.FloatField(help_text="Share of the cluster the weights give the tenant (0 to 1).")
    usage_gpu_hours = serializers.FloatField(help_text="Decayed GPU-hours used.")
    usage_share = serializers.FloatField(help_text="Share of all decayed usage (0 to 1).")
    running_gpus = serializers.FloatField()


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

"""Job templates and cloning over the API: ``GET /api/templates/``, ``GET /api/templates/{id}/``,
``POST /api/templates/{id}/submit/`` (a job from the template's newest version) and ``POST /api/jobs/{id}/clone/``.

A template the caller may not use, or a job they may not see, answers 404 as if it did not exist. A parameter
of the wrong type, or one the template lacks, is a 422 keyed ``parameters.<name>`` (the schema cannot know a
template's parameters); submit fields the schema describes are checked as in ``POST /api/jobs/`` (400, 422).
"""

from dataclasses import replace

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from gpuportal.web.api import text_field
from scheduling.api.serializers import JobDetailSerializer, JobSerializer, JobSubmitFields, _submit_field, job_detail
from scheduling.api.views import job_queryset
from scheduling.jobs import cloning, submission
from scheduling.models import JobTemplate
from scheduling.templates import services as job_templates


class TemplateParameterSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.ChoiceField(choices=job_templates.PARAMETER_TYPES)
    default = serializers.JSONField(allow_null=True, help_text="Null: the parameter must be given.")
    label = serializers.CharField(required=False)
    help = serializers.CharField(required=False)
    choices = serializers.ListField(child=serializers.CharField(), required=False, help_text="For a choice.")
    min = serializers.FloatField(required=False)
    max = serializers.FloatField(required=False)


class TemplateSerializer(serializers.ModelSerializer):
    """A template with its newest version: submit with ``template_version`` = ``version_id`` (or through
    ``/submit/``); parameters named like submit fields set them, the others fill ``{name}`` in the command."""

    tenant = serializers.CharField(source="tenant.name", read_only=True, allow_null=True, default=None,
                                   help_text="Null: a platform template.")
    version = serializers.SerializerMethodField(help_text="The newest version's number.")
    version_id = serializers.SerializerMethodField(help_text="Its id: the submit field template_version.")
    parameters = serializers.SerializerMethodField()
    defaults = serializers.SerializerMethodField(help_text="Values of submit fields the version fills in.")
    note = serializers.SerializerMethodField(help_text="The newest version's change note.")

    class Meta:
        model = JobTemplate
        fields = ["id", "name", "tenant", "kind", "description", "builtin", "archived", "version", "version_id",
                  "parameters", "defaults", "note"]
        read_only_fields = fields

    @staticmethod
    def _latest(template):
        return job_templates.latest_version(template)

    def get_version(self, template) -> int | None:
        latest = self._latest(template)
        return latest.version if latest else None

    def get_version_id(self, template) -> int | None:
        latest = self._latest(template)
        return latest.pk if latest else None

    @extend_schema_field(TemplateParameterSerializer(many=True))
    def get_parameters(self, template):
        latest = self._latest(template)
        return latest.parameters if latest else []

    @extend_schema_field(serializers.DictField())
    def get_defaults(self, template):
        latest = self._latest(template)
        return latest.defaults if latest else {}

    def get_note(self, template) -> str:
        latest = self._latest(template)
        return latest.note if latest else ""


def _optional(spec):
    """A submit field as an override: optional, and absent unless sent (the template fills it otherwise)."""
    return _submit_field(replace(spec, required=False, default=None))


#: What ``POST /api/templates/{id}/submit/`` takes: parameter values and any submit field to set explicitly.
TemplateSubmitSerializer = type("TemplateSubmitSerializer", (JobSubmitFields,), {
    "__doc__": "Parameter values (text, as typed) and submit fields that override the template's.",
    "__module__": __name__,
    "parameters": serializers.DictField(
        child=text_field(job_templates.MAX_TEXT_VALUE, blank=True), required=False,
        help_text="name -> value as text (\"10\", \"true\", \"H100\"); a parameter left out takes its default."),
    **{spec.name: _optional(spec) for spec in submission.SUBMIT_FIELDS
       if spec.name not in job_templates.NOT_TEMPLATED}})


class TemplateViewSet(viewsets.ReadOnlyModelViewSet):
    """Templates the caller may start from: the platform's and their tenants' (archived ones left out)."""

    serializer_class = TemplateSerializer
    filter_backends: list = []

    def get_queryset(self):
        templates = job_templates.usable_templates(self.request.user)
        if self.action == "list" and (name := self.request.query_params.get("name")):
            templates = templates.filter(name=name)
        return templates

    @extend_schema(parameters=[OpenApiParameter("name", str, required=False,
                                                description="Only the template of this exact name.")])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(request=TemplateSubmitSerializer, responses={201: JobDetailSerializer}, examples=[
        OpenApiExample("Two epochs of the one-GPU PyTorch template", request_only=True, value={
            "project": "vision/detection", "parameters": {"epochs": "2", "script": "finetune.py"}})])
    @action(detail=True, methods=["post"])
    def submit(self, request, pk=None):
        """Submit a job from the template's newest version (the job records that version)."""
        template = self.get_object()
        body = TemplateSubmitSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = {k: v for k, v in body.validated_data.items() if k != "parameters" and v is not None}
        version = job_templates.latest_version(template)
        data = job_templates.apply_template(version, body.validated_data.get("parameters") or {}, fields)
        job = submission.create_jobs(request.user, submission.validate_job_request(request.user, data))
        job = get_object_or_404(job_queryset(request.user).prefetch_related("events__actor"), pk=job.pk)
        return Response(job_detail(job), status=status.HTTP_201_CREATED)


class JobCloneView(APIView):
    """``POST /api/jobs/{id}/clone/``: submit a job's request again (an array or service: its whole group).
    404 for a job the caller cannot see; 422 naming the field when the request no longer passes."""

    @extend_schema(request=None, responses={201: JobSerializer})
    def post(self, request, pk):
        job = cloning.clonable_job(request.user, pk)
        clone = cloning.clone_job(request.user, job)
        return Response(JobSerializer(job_queryset(request.user).get(pk=clone.pk)).data,
                        status=status.HTTP_201_CREATED)

"""``GET /api/jobs/export/?format=csv|json``: the job list as it is shown, as a file.

The same jobs as the job list page (the filters of ``JobFilterSet``: ``status``, ``mine``, ``q``…; an array's
tasks and a service's replicas are not rows of it), in its order (``sort``) and with its columns (``columns``,
comma-separated or repeated); without ``columns`` or ``sort``, those the caller last chose on the page. CSV cells
go through the one writer that keeps spreadsheets from running them (``gpuportal.text.exports``). Both formats
stream: any number of rows, read a chunk at a time.
"""

from django.http import StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer

from gpuportal.text.exports import csv_lines, json_object_lines
from gpuportal.web.schema import ContractSchema
from scheduling.jobs import listing
from scheduling.jobs.columns import COLUMNS, sort_choices
from scheduling.jobs.filtersets import JobFilterSet
from scheduling.models import Job

#: The formats of an export and their content types.
FORMATS = {"csv": "text/csv; charset=utf-8", "json": "application/json"}


class JobExportSerializer(serializers.Serializer):
    """A JSON export: the columns in their order, then one object per job with the id and those columns."""

    columns = serializers.ListField(child=serializers.ChoiceField(choices=["id", *COLUMNS]),
                                    help_text="``id`` and the columns shown, in the list's order.")
    jobs = serializers.ListField(child=serializers.DictField(), help_text=(
        "One object per job: ``id`` and each column. Moments in ISO 8601, ``elapsed`` and ``wait`` in seconds, "
        "``gpus`` the GPUs asked for (a share as a fraction), ``efficiency`` the mean GPU utilisation (0-100) "
        "while it held its GPUs, ``null`` where there is nothing to show."))


class ExportSchema(ContractSchema):
    """One file, not a list of objects, yet it takes the list's filters: the schema documents them."""

    def get_filter_backends(self):
        return getattr(self.view, "filter_backends", [])


class JobExportView(generics.GenericAPIView):
    """The job list as shown, as CSV or JSON: its filters, its order (``sort``) and its columns (``columns``)."""

    filterset_class = JobFilterSet
    pagination_class = None
    schema = ExportSchema()

    def get_queryset(self):
        return Job.objects.visible_to(self.request.user).filter(group__isnull=True)

    def perform_content_negotiation(self, request, force=False):
        """``format`` names the file asked for, which DRF would read as one of its renderers: the answer's format
        is chosen here, and a refusal is JSON."""
        return JSONRenderer(), JSONRenderer.media_type

    @extend_schema(
        parameters=[
            OpenApiParameter("format", str, enum=list(FORMATS), required=True, description="The file: csv or json."),
            OpenApiParameter("columns", {"type": "array", "minItems": 1, "items": {"type": "string", "enum": list(
                COLUMNS)}}, explode=False, style="form", description=(
                "The columns, comma-separated (the caller's remembered choice when absent; the default columns "
                "when none was chosen). The job's id always comes first.")),
            OpenApiParameter("sort", str, enum=[value for value, _label in sort_choices()], description=(
                "A column for ascending, -column for descending (the caller's remembered order when absent; "
                "newest first when none was chosen)."))],
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="A header of ``id`` and the "
                                                      "columns, then one line per job."),
                   (200, "application/json"): JobExportSerializer})
    def get(self, request):
        chosen_format = request.query_params.get("format", "")
        if chosen_format not in FORMATS:
            raise ValidationError({"format": [_("Give csv or json (got %(value)r).") % {
                "value": chosen_format[:20]}]})
        jobs = self.filter_queryset(self.get_queryset())  # a refused filter, order or column is a 400 naming it
        columns, sort = listing.export_shape(request.user, request.query_params)
        header = ["id", *columns]
        rows = listing.export_rows(listing.ordered(jobs, sort), columns)
        lines = csv_lines(header, rows) if chosen_format == "csv" else json_object_lines(header, rows)
        response = StreamingHttpResponse(lines, content_type=FORMATS[chosen_format])
        response["Content-Disposition"] = f'attachment; filename="jobs.{chosen_format}"'
        return response

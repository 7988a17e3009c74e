"""The audit page and its CSV export (same filters as the API)."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import StreamingHttpResponse
from django.shortcuts import render

from gpuportal.text.exports import csv_lines
from tenants import access

from .changes import changes_of, object_label
from .filtersets import AuditFilterSet
from .models import AuditRecord

CSV_COLUMNS = ["seq", "at", "actor_name", "action", "object_type", "object_id", "object_repr", "tenant",
               "before", "after", "reason", "source_address", "hash"]


def readable_records(user):
    if not (access.reads_whole_audit_log(user) or access.admin_tenant_ids(user)):
        raise PermissionDenied
    return AuditRecord.objects.visible_to(user).select_related("tenant")


def _csv(records):
    return csv_lines(CSV_COLUMNS, ([r.seq, r.at.isoformat(), r.actor_name, r.action, r.object_type, r.object_id,
                                    r.object_repr, r.tenant.name if r.tenant else "", r.before, r.after, r.reason,
                                    r.source_address, r.hash] for r in records.iterator(chunk_size=2000)))


@login_required
def audit_log(request):
    filterset = AuditFilterSet(request.GET or None, queryset=readable_records(request.user))
    if request.GET.get("format") == "csv":
        response = StreamingHttpResponse(_csv(filterset.qs), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="gpuportal-audit.csv"'
        return response
    page = Paginator(filterset.qs, 100).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    records = list(page.object_list)
    described = changes_of(records)
    for entry in records:
        entry.changes = described.get(entry.pk, [])
        entry.object_label = object_label(entry.object_type)
    return render(request, "audit/log.html", {"filter": filterset, "page": page, "records": records,
                                              "query": query.urlencode()})

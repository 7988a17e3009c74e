"""The templates pages: the list everyone may start from, a template's versions, and the management forms of
tenant admins (their tenant's templates) and platform admins (the platform's). Thin: the rules and the audit
records are in ``job_templates``."""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from scheduling.jobs.forms import TemplateContentForm, TemplateCreateForm
from scheduling.templates import services as job_templates

#: The longest archive reason the page takes (the audit record keeps it whole).
ARCHIVE_REASON_MAX = 500


def _rows(user, templates):
    rows = []
    for template in templates:
        latest = job_templates.latest_version(template)
        rows.append({"template": template, "latest": latest,
                     "can_manage": job_templates.can_manage(user, template.tenant_id)})
    return rows


@login_required
def template_list(request):
    user = request.user
    templates = list(job_templates.usable_templates(user, include_archived=True))
    active = [t for t in templates if not t.archived]
    archived = [t for t in templates if t.archived and job_templates.can_manage(user, t.tenant_id)]
    return render(request, "scheduling/template_list.html", {
        "rows": _rows(user, active), "archived_rows": _rows(user, archived),
        "may_create": job_templates.may_manage_any(user)})


def _template(user, pk):
    return get_object_or_404(job_templates.usable_templates(user, include_archived=True), pk=pk)


@login_required
def template_detail(request, pk):
    template = _template(request.user, pk)
    versions = sorted(template.versions.all(), key=lambda v: -v.version)
    return render(request, "scheduling/template_detail.html", {
        "template": template, "latest": versions[0] if versions else None,
        "versions": [{"version": v, "parameters": json.dumps(v.parameters, indent=2, ensure_ascii=False),
                      "defaults": json.dumps(v.defaults, indent=2, ensure_ascii=False)} for v in versions],
        "can_manage": job_templates.can_manage(request.user, template.tenant_id),
        "max_archive_reason": ARCHIVE_REASON_MAX})


@login_required
def template_create(request):
    if not job_templates.may_manage_any(request.user):
        raise PermissionDenied(_("Only tenant admins and platform admins manage templates."))
    form = TemplateCreateForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            template = job_templates.create_template(
                request.user, tenant=form.owner(), name=form.cleaned_data["name"], kind=form.cleaned_data["kind"],
                description=form.cleaned_data["description"], parameters=form.cleaned_data["parameters"],
                defaults=form.cleaned_data["defaults"], note=form.cleaned_data["note"])
        except ValidationError as exc:
            form.attach(exc)
        else:
            messages.success(request, _("Template %(name)s created (version 1).") % {"name": template.name})
            return redirect("scheduling:template-detail", pk=template.pk)
    return render(request, "scheduling/template_form.html", {"form": form, "template": None},
                  status=400 if form.errors else 200)


@login_required
def template_version_new(request, pk):
    template = _template(request.user, pk)
    if not job_templates.can_manage(request.user, template.tenant_id):
        raise PermissionDenied(_("Only this template's tenant admins (or platform admins) may change it."))
    latest = job_templates.latest_version(template)
    initial = {"parameters": json.dumps(latest.parameters if latest else [], indent=2, ensure_ascii=False),
               "defaults": json.dumps(latest.defaults if latest else {}, indent=2, ensure_ascii=False)}
    form = TemplateContentForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            version = job_templates.add_version(request.user, template, parameters=form.cleaned_data["parameters"],
                                                defaults=form.cleaned_data["defaults"],
                                                note=form.cleaned_data["note"])
        except ValidationError as exc:
            form.attach(exc)
        else:
            messages.success(request, _("Template %(name)s: version %(n)d added.") % {
                "name": template.name, "n": version.version})
            return redirect("scheduling:template-detail", pk=template.pk)
    return render(request, "scheduling/template_form.html", {"form": form, "template": template, "latest": latest},
                  status=400 if form.errors else 200)


@login_required
@require_POST
def template_archive(request, pk):
    template = _template(request.user, pk)
    reason = request.POST.get("reason", "").strip()
    if len(reason) > ARCHIVE_REASON_MAX:  # refused, never cut
        messages.error(request, _("Reason: at most %(max)d characters (got %(n)d); the template was not archived.")
                       % {"max": ARCHIVE_REASON_MAX, "n": len(reason)})
        return redirect("scheduling:template-detail", pk=template.pk)
    try:
        job_templates.archive_template(request.user, template, reason)
        messages.success(request, _("Template %(name)s archived: it is no longer offered.") % {"name": template.name})
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("scheduling:template-detail", pk=template.pk)

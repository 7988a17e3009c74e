"""Job templates: platform and tenant templates, their immutable versions, and how a version becomes a submission.

**How a version becomes a submission** (one rule for the page, the API and the CLI, ``apply_template``):

1. Start from the version's ``defaults`` (values of submit fields, ``submission.SUBMIT_FIELDS``) and the
   template's ``kind``.
2. Each parameter takes the value given, else its ``default``; a parameter without a default must be given.
   Values are checked against the parameter's type (int, float, text, choice, bool); a wrong one is refused
   naming the parameter.
3. A parameter named like a submit field (``gpus_per_node``, ``image``, ``replicas``…) sets that field.
4. Fields given explicitly with the submission (the form's fields, the API's body) override both.
5. Every other parameter is substituted into the command where it is written ``{name}``; braces that name no
   such parameter (``${MASTER_ADDR}`` of the shell) are left alone.
6. ``template_version`` is set to the version's id, so the job records the version it came from.

Versions are immutable: a change adds version N+1. Tenant admins manage their tenant's templates, platform
admins the platform's (the built-in ones among them); each change is written to the audit log. Which version a
submission may name is submission's rule (``submission.usable_version``).
"""

from __future__ import annotations

import math
import re

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from audit import log as audit
from audit.models import AuditAction
from scheduling.jobs.submission import FIELDS
from scheduling.models import JobTemplate, JobTemplateVersion, WorkloadKind
from tenants import access
from tenants.models import Tenant

#: The types a parameter may have.
PARAMETER_TYPES = ("int", "float", "text", "choice", "bool")
#: Submit fields a template may not fill in: the version is set by the rule itself, the kind by the template.
NOT_TEMPLATED = ("template_version", "kind")
MAX_PARAMETERS = 50
MAX_TEXT_VALUE = 1000
#: The longest name, description and change note a template may have, and a parameter's label or help (the
#: forms, the checks and their messages read them).
MAX_NAME = JobTemplate._meta.get_field("name").max_length
MAX_DESCRIPTION = 5000
MAX_NOTE = JobTemplateVersion._meta.get_field("note").max_length
MAX_PARAMETER_TEXT = 500
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,39}$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


# --- who may use and manage what ----------------------------------------------------------------------------


def usable_templates(user, include_archived: bool = False):
    """Templates ``user`` may start from: the platform's and those of their tenants (every tenant's for
    platform admins and managers), each with its versions newest first (``latest_version``)."""
    templates = JobTemplate.objects.select_related("tenant").prefetch_related("versions")
    if not access.sees_all_tenants(user):
        templates = templates.filter(Q(tenant__isnull=True) | Q(tenant_id__in=access.member_tenant_ids(user)))
    if not include_archived:
        templates = templates.filter(archived=False)
    return templates.order_by("tenant__name", "name", "id")


def usable_template_version(user, version_id) -> JobTemplateVersion | None:
    """A version of a template ``user`` may use (archived templates excluded), or None."""
    try:
        number = int(version_id)
    except (TypeError, ValueError):
        return None
    if not 0 < number < 2 ** 63:
        return None
    template_ids = usable_templates(user).values("pk")
    return JobTemplateVersion.objects.filter(pk=number, template__in=template_ids).select_related(
        "template", "template__tenant").first()


def latest_version(template: JobTemplate) -> JobTemplateVersion | None:
    """The newest version (from the prefetched versions when loaded with ``usable_templates``)."""
    versions = list(template.versions.all())
    return max(versions, key=lambda v: v.version) if versions else None


def can_manage(user, tenant_id: int | None) -> bool:
    """Platform admins manage every template; tenant admins their tenant's (never the platform's)."""
    return access.can_manage_tenant(user, tenant_id)


def manageable_tenants(user):
    """Tenants whose templates ``user`` manages (all for platform admins)."""
    if access.is_platform_admin(user):
        return Tenant.objects.order_by("name")
    return Tenant.objects.filter(pk__in=access.admin_tenant_ids(user)).order_by("name")


def may_manage_any(user) -> bool:
    return access.is_platform_admin(user) or bool(access.admin_tenant_ids(user))


# --- parameters: their declaration and their values ---------------------------------------------------------


def _format(value) -> str:
    """A value as it is written into a command."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def parse_value(parameter: dict, raw):
    """``raw`` (typed, or text as a form or command line gives it) as the parameter's type; ValueError with a
    message naming the parameter and what it takes."""
    name, kind = parameter["name"], parameter["type"]
    if raw is None or (isinstance(raw, str) and raw.strip() == "" and kind != "text"):
        if parameter.get("default") is None:
            raise ValueError(_("Parameter %(name)s is required.") % {"name": name})
        raw = parameter["default"]
    text = raw.strip() if isinstance(raw, str) else raw
    if kind == "bool":
        if isinstance(text, bool):
            return text
        if str(text).lower() in _TRUE or str(text).lower() in _FALSE:
            return str(text).lower() in _TRUE
        raise ValueError(_("Parameter %(name)s must be true or false, not %(v)r.") % {"name": name, "v": raw})
    if kind == "int":
        try:
            if isinstance(text, bool) or (isinstance(text, float) and not text.is_integer()):
                raise ValueError
            value = int(text)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(_("Parameter %(name)s must be a whole number, not %(v)r.") % {
                "name": name, "v": raw}) from None
        _in_bounds(parameter, value)
        return value
    if kind == "float":
        try:
            if isinstance(text, bool):
                raise ValueError
            value = float(text)
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):
            raise ValueError(_("Parameter %(name)s must be a number, not %(v)r.") % {"name": name, "v": raw})
        _in_bounds(parameter, value)
        return value
    if kind == "choice":
        choices = [str(c) for c in parameter.get("choices") or []]
        if str(text) not in choices:
            raise ValueError(_("Parameter %(name)s must be one of %(choices)s, not %(v)r.") % {
                "name": name, "choices": ", ".join(choices), "v": raw})
        return str(text)
    value = str(raw)
    if len(value) > MAX_TEXT_VALUE:
        raise ValueError(_("Parameter %(name)s: at most %(max)d characters (got %(n)d).") % {
            "name": name, "max": MAX_TEXT_VALUE, "n": len(value)})
    return value


def _in_bounds(parameter: dict, value) -> None:
    low, high = parameter.get("min"), parameter.get("max")
    if low is not None and value < low:
        raise ValueError(_("Parameter %(name)s must be at least %(min)s (got %(v)s).") % {
            "name": parameter["name"], "min": low, "v": value})
    if high is not None and value > high:
        raise ValueError(_("Parameter %(name)s must be at most %(max)s (got %(v)s).") % {
            "name": parameter["name"], "max": high, "v": value})


def _check_parameter(index: int, item, seen: set) -> str:
    """What is wrong with one parameter's declaration ("" when nothing is)."""
    where = _("Parameter %(n)d") % {"n": index + 1}
    if not isinstance(item, dict):
        return _("%(where)s must be an object such as {\"name\": \"epochs\", \"type\": \"int\", \"default\": 10}.") % {
            "where": where}
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        return _("%(where)s: name %(name)r must be a letter or _ followed by letters, digits or _ (at most 40).") % {
            "where": where, "name": name}
    where = _("Parameter %(name)s") % {"name": name}
    if name in seen:
        return _("%(where)s is declared twice.") % {"where": where}
    if name in NOT_TEMPLATED:
        return _("%(where)s: %(name)s is set by the template itself, not by a parameter.") % {
            "where": where, "name": name}
    seen.add(name)
    unknown = set(item) - {"name", "type", "default", "label", "help", "choices", "min", "max"}
    if unknown:
        return _("%(where)s: unknown keys %(keys)s (allowed: name, type, default, label, help, choices, min, "
                 "max).") % {"where": where, "keys": ", ".join(sorted(unknown))}
    if item.get("type") not in PARAMETER_TYPES:
        return _("%(where)s: type %(type)r must be one of %(types)s.") % {
            "where": where, "type": item.get("type"), "types": ", ".join(PARAMETER_TYPES)}
    for key in ("label", "help"):
        if not isinstance(item.get(key, ""), str) or len(item.get(key, "")) > MAX_PARAMETER_TEXT:
            return _("%(where)s: %(key)s must be text of at most %(max)d characters.") % {
                "where": where, "key": key, "max": MAX_PARAMETER_TEXT}
    choices = item.get("choices")
    if item["type"] == "choice" and (not isinstance(choices, list) or not choices
                                     or not all(isinstance(c, str | int) and not isinstance(c, bool)
                                                for c in choices)):
        return _("%(where)s: a choice needs \"choices\", a list of values.") % {"where": where}
    for key in ("min", "max"):
        bound = item.get(key)
        if bound is not None and (item["type"] not in ("int", "float") or isinstance(bound, bool)
                                  or not isinstance(bound, int | float)):
            return _("%(where)s: %(key)s is a number, and only for int and float.") % {"where": where, "key": key}
    if item.get("default") is not None:
        try:
            parse_value(item, item["default"])
        except ValueError as bad:
            return _("%(where)s: its default is wrong: %(why)s") % {"where": where, "why": bad}
    return ""


def check_parameters(parameters) -> list[str]:
    """The problems of a version's parameter declarations (empty when there are none)."""
    if not isinstance(parameters, list):
        return [_("Parameters must be a list of objects.")]
    if len(parameters) > MAX_PARAMETERS:
        return [_("At most %(max)d parameters (got %(n)d).") % {"max": MAX_PARAMETERS, "n": len(parameters)}]
    seen: set = set()
    return [problem for index, item in enumerate(parameters) if (problem := _check_parameter(index, item, seen))]


def check_defaults(defaults) -> list[str]:
    """The problems of a version's defaults: keys must be submit fields, values plain JSON scalars."""

    if not isinstance(defaults, dict):
        return [_("Defaults must be an object of submit fields, e.g. {\"gpu_model\": \"A100\"}.")]
    problems = []
    for key, value in defaults.items():
        if key not in FIELDS or key in NOT_TEMPLATED:
            problems.append(_("Defaults: %(key)r is not a submit field a template sets (fields: %(fields)s).") % {
                "key": key, "fields": ", ".join(f for f in FIELDS if f not in NOT_TEMPLATED)})
        elif FIELDS[key].kind == "list":  # named ports: a list of entries, or text with commas between them
            if not isinstance(value, str | None) and not (isinstance(value, list) and all(
                    isinstance(entry, str) for entry in value)):
                problems.append(_("Defaults: %(key)s must be a list of text entries, e.g. [\"tensorboard:6006\"].")
                                % {"key": key})
        elif value is not None and not isinstance(value, str | int | float | bool):
            problems.append(_("Defaults: %(key)s must be text, a number or true/false.") % {"key": key})
    return problems


def apply_template(version: JobTemplateVersion, parameters: dict | None = None,
                   fields: dict | None = None) -> dict:
    """The submission ``version`` makes with these parameter values and explicit ``fields`` (the module's
    docstring gives the rule). ValidationError keyed ``parameters.<name>`` for an unknown or wrong parameter."""

    given = dict(parameters or {})
    declared = {p["name"]: p for p in version.parameters}
    errors: dict[str, str] = {}
    for name in given:
        if name not in declared:
            errors[f"parameters.{name}"] = _("Unknown parameter %(name)r; this template has: %(names)s.") % {
                "name": name, "names": ", ".join(declared) or _("none")}
    values = {}
    for name, parameter in declared.items():
        try:
            values[name] = parse_value(parameter, given.get(name))
        except ValueError as bad:
            errors[f"parameters.{name}"] = str(bad)
    if errors:
        raise ValidationError(errors)
    data = {k: v for k, v in version.defaults.items() if k not in NOT_TEMPLATED}
    data.update({name: value for name, value in values.items() if name in FIELDS})
    data.update({k: v for k, v in (fields or {}).items() if v not in (None, "") and k not in NOT_TEMPLATED})
    command = data.get("command")
    if isinstance(command, str):
        data["command"] = _PLACEHOLDER.sub(
            lambda m: _format(values[m[1]]) if m[1] in values and m[1] not in FIELDS else m[0], command)
    data["kind"] = version.template.kind
    data["template_version"] = version.pk
    return data


# --- changes: create, add a version, archive ----------------------------------------------------------------


def _content(version: JobTemplateVersion) -> dict:
    return {"version": version.version, "parameters": version.parameters, "defaults": version.defaults,
            "note": version.note}


def _content_problems(parameters, defaults, note: str) -> dict[str, list[str]]:
    """What is wrong with a version's content, by field (empty when nothing is)."""
    problems = {"parameters": check_parameters(parameters), "defaults": check_defaults(defaults)}
    if len(note or "") > MAX_NOTE:
        problems["note"] = [_("Change note: at most %(max)d characters (got %(n)d).") % {
            "max": MAX_NOTE, "n": len(note)}]
    return {field: found for field, found in problems.items() if found}


def _name_problem(tenant: Tenant | None, name: str) -> str:
    """Why ``name`` (stripped) cannot name a new template of ``tenant`` ("" when it can)."""
    if not name:
        return _("Name is required.")
    if len(name) > MAX_NAME:
        return _("Name: at most %(max)d characters (got %(n)d).") % {"max": MAX_NAME, "n": len(name)}
    if JobTemplate.objects.filter(tenant=tenant, name=name).exists():
        return _("%(where)s already has a template named %(name)r.") % {
            "where": tenant.name if tenant else _("The platform"), "name": name}
    return ""


def create_template(user, *, tenant: Tenant | None, name: str, kind: str, description: str = "",
                    parameters=None, defaults=None, note: str = "") -> JobTemplate:
    """A new template with its version 1: a tenant's (its admins) or the platform's (platform admins)."""
    if not can_manage(user, tenant.pk if tenant else None):
        raise PermissionDenied(_("Only platform admins create platform templates, and tenant admins their "
                                 "tenant's."))
    parameters = [] if parameters is None else parameters
    defaults = {} if defaults is None else defaults
    name = (name or "").strip()
    problems = {field: message for field, message in (
        ("name", _name_problem(tenant, name)),
        ("kind", "" if kind in WorkloadKind.values else _("Unknown kind %(k)r; choose one of: %(choices)s.") % {
            "k": kind, "choices": ", ".join(WorkloadKind.values)}),
        ("description", "" if len(description or "") <= MAX_DESCRIPTION else _(
            "Description: at most %(max)d characters.") % {"max": MAX_DESCRIPTION}),
    ) if message}
    problems.update(_content_problems(parameters, defaults, note))
    if problems:
        raise ValidationError(problems)
    with transaction.atomic():
        template = JobTemplate.objects.create(name=name, tenant=tenant, kind=kind, description=description or "")
        version = JobTemplateVersion.objects.create(template=template, version=1, parameters=parameters,
                                                    defaults=defaults, note=note or "", created_by=user,
                                                    created_at=timezone.now())
        audit.record(AuditAction.TEMPLATE_CREATE, template, actor=user, tenant=tenant, after={
            "name": name, "tenant": tenant.name if tenant else None, "kind": kind, "description": description,
            **_content(version)})
    return template


def add_version(user, template: JobTemplate, *, parameters, defaults, note: str = "") -> JobTemplateVersion:
    """Version N+1 of ``template`` (versions are never edited: a job keeps pointing at what it ran)."""
    if not can_manage(user, template.tenant_id):
        raise PermissionDenied(_("Only this template's tenant admins (or platform admins) may change it."))
    problems = {"template": _("Template %(name)s is archived; it takes no new versions.") % {
        "name": template.name}} if template.archived else {}
    problems.update(_content_problems(parameters, defaults, note))
    if problems:
        raise ValidationError(problems)
    with transaction.atomic():
        JobTemplate.objects.select_for_update().filter(pk=template.pk).first()  # one N+1 at a time
        previous = template.versions.order_by("-version").first()
        number = (template.versions.aggregate(n=Max("version"))["n"] or 0) + 1
        version = JobTemplateVersion.objects.create(template=template, version=number, parameters=parameters,
                                                    defaults=defaults, note=note or "", created_by=user,
                                                    created_at=timezone.now())
        audit.record(AuditAction.TEMPLATE_VERSION, template, actor=user, tenant=template.tenant,
                     before=_content(previous) if previous else None, after=_content(version), reason=note or "")
    return version


def archive_template(user, template: JobTemplate, reason: str = "") -> JobTemplate:
    """Hide a template from new submissions; jobs made from it keep their version."""
    if not can_manage(user, template.tenant_id):
        raise PermissionDenied(_("Only this template's tenant admins (or platform admins) may archive it."))
    if template.archived:
        raise ValidationError({"template": _("Template %(name)s is already archived.") % {"name": template.name}})
    with transaction.atomic():
        template.archived = True
        template.save(update_fields=["archived", "last_updated"])
        audit.record(AuditAction.TEMPLATE_ARCHIVE, template, actor=user, tenant=template.tenant,
                     before={"archived": False}, after={"archived": True}, reason=reason or "")
    return template

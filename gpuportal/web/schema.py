"""The OpenAPI schema as a contract: every error an operation answers, described.

``ContractSchema`` is drf-spectacular's ``AutoSchema`` plus, for each operation, the error statuses of
``gpuportal.web.api`` (field maps for 400, 409 and 422, ``{"detail"}`` otherwise) and the enums of read-only
model fields as the API returns them. ``add_links`` adds the OpenAPI links from a created object to what can
be done with it next, which clients and the stateful contract tests follow.
"""

from django_filters import ModelChoiceFilter
from drf_spectacular.contrib.django_filters import DjangoFilterExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import permissions, serializers

from gpuportal.web.api import FIELD_ERROR_STATUSES

FIELD_ERRORS_SCHEMA = {
    "type": "object", "minProperties": 1,
    "description": "Each key names a field (nested fields dotted: checkpoint.path; body for the body itself; "
                   "non_field_errors for what concerns several fields); each value lists what is wrong with it.",
    "additionalProperties": {"type": "array", "items": {"type": "string"}},
    "example": {"gpus_per_node": ["GPUs per node must be at least 1 (got 0)."]},
}
DETAIL_SCHEMA = {
    "type": "object", "required": ["detail"], "properties": {"detail": {"type": "string"}},
    "example": {"detail": "Authentication credentials were not provided."},
}
ERROR_DESCRIPTIONS = {
    "400": "The request does not match this schema: a field's type, range, length, format or choice; a body that "
           "is not one JSON object; text with NUL or lone surrogates; a number that is not finite.",
    "401": "No credentials, or a token that is unknown, expired or revoked.",
    "403": "Signed in, but your role does not allow this (a session request also needs its CSRF token).",
    "404": "Nothing of that id among what you may see (another tenant's object answers 404 too), or a page past "
           "the last.",
    "409": "An identical object was created at the same moment by another request (the fields named make it "
           "unique), or the object is no longer in a state this action applies to (the message names its state).",
    "415": "The body is not JSON: send Content-Type: application/json.",
    "422": "The request matches the schema, but a rule the schema cannot express refuses it (a name that does "
           "not exist, more GPUs than the fleet has, an end before its start, a job that has already ended); "
           "each key names a field.",
    "429": "Too many requests: the Retry-After header says in how many seconds to try again.",
    "503": "The database connection was lost under the request (a failover, a restart): try again after the "
           "seconds the Retry-After header says; a creation sent again with the same Idempotency-Key is stored "
           "once.",
}


class ContractSchema(AutoSchema):
    """drf-spectacular's schema with every error an operation can answer (statuses in the module's docstring)
    and the enums of read-only model fields as the API returns them (``""`` where the model allows blank)."""

    def _get_parameters(self):
        parameters = super()._get_parameters()
        for parameter in parameters:  # gpuportal.web.validation.InputPolicyMiddleware refuses NUL in paths and queries
            schema = parameter.get("schema", {})
            schema = schema.get("items", schema) if schema.get("type") == "array" else schema
            if parameter["in"] in ("path", "query") and schema.get("type") == "string" and not (
                    {"enum", "format", "pattern"} & set(schema)):
                schema["pattern"] = "^[^\\u0000]*$"
        return parameters

    def _get_request_body(self, direction="request"):
        body = super()._get_request_body(direction)
        if body is not None and isinstance(self.get_request_serializer(), PolymorphicProxySerializer):
            body["required"] = True  # one of several bodies, each with required fields
        return body

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code in self._error_codes():
            if code not in responses:
                responses[code] = self._error_response(code)
        return responses

    def _error_codes(self) -> list[str]:
        permission_classes = [p.__class__ for p in self.view.get_permissions()]
        authenticated = permissions.AllowAny not in permission_classes and bool(permission_classes)
        body = self.method in ("POST", "PUT", "PATCH") and self.get_request_serializer() is not None
        query = [p for p in self._get_parameters() if p["in"] == "query"]
        codes = ["429", "503", *getattr(self.view, "error_statuses", ())]  # a view's own, e.g. a job token's 403
        if body or query:
            codes.append("400")
        if authenticated:
            codes += ["401", "403"]
        if "{" in self.path or any(p["name"] == "page" for p in query):
            codes.append("404")
        if body:
            codes.append("415")
        if self.method == "POST" and authenticated:
            codes.append("422")
            if self._is_create_operation():
                codes.append("409")
        return sorted(set(codes))

    def _error_response(self, code: str) -> dict:
        name, schema = (("FieldErrors", FIELD_ERRORS_SCHEMA) if int(code) in FIELD_ERROR_STATUSES
                        else ("ErrorDetail", DETAIL_SCHEMA))
        component = ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=name, schema=schema)
        self.registry.register_on_missing(component)
        description = getattr(self.view, "error_descriptions", {}).get(code, ERROR_DESCRIPTIONS[code])
        response = {"content": {"application/json": {"schema": component.ref}}, "description": description}
        if code in ("429", "503"):
            response["headers"] = {"Retry-After": {"schema": {"type": "integer"},
                                                   "description": "Seconds to wait before the next request."}}
        return response

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        if field.read_only and (model_field := _model_field(field)) is not None:
            # DRF drops allow_blank/allow_null from read-only model fields, but the values are returned.
            field.allow_null = field.allow_null or bool(model_field.null)
            if isinstance(field, serializers.ChoiceField):
                field.allow_blank = field.allow_blank or bool(model_field.blank)
        return super()._map_serializer_field(field, direction, bypass_extensions)


class ContractFilterExtension(DjangoFilterExtension):
    """The filters of ``gpuportal.web.validation.ContractFilterBackend``: django-filter's, and a filter by a related
    object's name lists the names there are now (any other is refused with a 400, as the schema then says)."""

    target_class = "gpuportal.web.validation.ContractFilterBackend"
    priority = 1

    def resolve_filter_field(self, auto_schema, model, filterset_class, field_name, filter_field):
        parameters = super().resolve_filter_field(auto_schema, model, filterset_class, field_name, filter_field)
        to_field = filter_field.extra.get("to_field_name")
        if isinstance(filter_field, ModelChoiceFilter) and to_field and filter_field.queryset is not None:
            values = sorted(filter_field.queryset.values_list(to_field, flat=True))
            for parameter in parameters if values else ():
                parameter["schema"] = {"type": "string", "enum": values}
        return parameters


def _model_field(field):
    """The model field a serializer field reads, when it reads one directly."""
    meta = getattr(getattr(field, "parent", None), "Meta", None)
    model = getattr(meta, "model", None)
    if model is None or "." in (field.source or ""):
        return None
    try:
        return model._meta.get_field(field.source)
    except Exception:  # noqa: BLE001 - a computed attribute, not a model field
        return None


#: Where a created object leads (OpenAPI links, followed by clients and by the stateful contract tests):
#: operation id -> (status, {link name: (target operation id, its path parameter, the answer's field)}).
LINKS = {
    "jobs_create": ("201", {"GetJob": ("jobs_retrieve", "id", "id"), "CancelJob": ("jobs_cancel_create", "id", "id"),
                            "HoldJob": ("jobs_hold_create", "id", "id"),
                            "ReleaseJob": ("jobs_release_create", "id", "id"),
                            "JobLog": ("jobs_log_retrieve", "id", "id")}),
    "priority_requests_create": ("201", {
        "GetRequest": ("priority_requests_retrieve", "id", "id"),
        "ApproveRequest": ("priority_requests_approve_create", "id", "id"),
        "DenyRequest": ("priority_requests_deny_create", "id", "id")}),
    "tokens_create": ("201", {"GetToken": ("tokens_retrieve", "id", "id"),
                              "RevokeToken": ("tokens_revoke_create", "id", "id"),
                              "DeleteToken": ("tokens_destroy", "id", "id")}),
}


def add_links(result, generator, request, public):
    """drf-spectacular postprocessing hook: the ``LINKS`` between operations, for operations that exist."""
    operations = {op.get("operationId"): op for path in result.get("paths", {}).values()
                  for op in path.values() if isinstance(op, dict)}
    for source, (code, links) in LINKS.items():
        response = operations.get(source, {}).get("responses", {}).get(code)
        if response is None:
            continue
        response["links"] = {name: {"operationId": target, "parameters": {parameter: f"$response.body#/{field}"}}
                             for name, (target, parameter, field) in links.items() if target in operations}
    return result

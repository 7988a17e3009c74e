"""Shared REST API pieces: the request-body policy of every serializer, pagination, and the error format every
endpoint answers with (the JSON parser and the query filters are in ``gpuportal.web.validation``, the schema's
account of the errors in ``gpuportal.web.schema``).

What each status means, on every operation (and so in the schema):

* **400** the request does not match the schema: a field's type, range, length, format or choice, a body that
  is not a JSON object, text that cannot be stored (NUL, lone surrogates), a number that is not finite.
* **422** the request matches the schema but a rule the schema cannot express refuses it: a name that does
  not exist, more GPUs than the fleet's nodes have, an end before its start, a job that has already ended.
* **409** an identical object was created at the same moment by another request (a unique constraint), or the
  object is no longer in a state the action applies to (a hold on a job that was admitted meanwhile).
* **401** no or a bad credential; **403** a role that does not allow it; **404** nothing of that id among
  what the caller may see (or a page past the last); **415** a body that is not JSON; **429** throttled.
* **503** the database connection was lost under the request (a failover, a restart): nothing of it was
  committed, or a retry with the same ``Idempotency-Key`` returns what was; ``Retry-After`` says when to retry.

400, 409 and 422 bodies are field maps, ``{"field": ["message", ...]}`` (nested fields dotted:
``checkpoint.path``); every other error body is ``{"detail": "message"}``.
"""

import logging
import re

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import RegexValidator
from django.db import IntegrityError, InterfaceError, OperationalError
from django.http import Http404
from django.utils.text import format_lazy
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions, serializers, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from gpuportal.views import DATABASE_UNAVAILABLE, RETRY_AFTER_SECONDS
from gpuportal.web.conflicts import StateConflict
from gpuportal.web.validation import RFC3339_DATE, RFC3339_DATETIME, whole_number

logger = logging.getLogger(__name__)

#: The largest page number a client may ask for (a page past the last is a 404).
MAX_PAGE = 2 ** 31 - 1

#: The ``Idempotency-Key`` header as the OpenAPI schema documents it (gpuportal/web/idempotency.py).
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key", {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]+$"},
    OpenApiParameter.HEADER, required=False,
    description="A key of your choice (up to 255 printable ASCII characters): sending the same request with "
                "the same key again returns the first answer (header Idempotent-Replayed: true) instead of "
                "creating a duplicate. The same key with another body answers 422.")


class Unprocessable(exceptions.APIException):
    """422: well-formed, refused by a rule beyond the schema (the services' ValidationError)."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = gettext_lazy("The request was refused.")
    default_code = "unprocessable"


class DatabaseUnavailable(exceptions.APIException):
    """503: the database connection broke under the request; a retry soon is the right answer, not a 500."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = DATABASE_UNAVAILABLE
    default_code = "database_unavailable"




class Conflict(exceptions.APIException):
    """409: an identical object was created at the same moment (a unique constraint), or the object left the
    state the action applies to (``gpuportal.web.conflicts.StateConflict``)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = gettext_lazy("The object already exists.")
    default_code = "conflict"


# --- request bodies: one policy for every field ----------------------------------------------------------

#: The JSON type each kind of serializer field takes, as the schema states it (first match wins).
JSON_TYPES = (
    (serializers.BooleanField, (bool,), gettext_lazy("true or false")),
    (serializers.IntegerField, (int,), gettext_lazy("a whole number")),
    (serializers.FloatField, (int, float), gettext_lazy("a number")),
    (serializers.DecimalField, (str,), gettext_lazy("a decimal number written as a string, e.g. \"2.5\"")),
    (serializers.ListField, (list,), gettext_lazy("a list")),
    (serializers.DictField, (dict,), gettext_lazy("an object")),
    (serializers.BaseSerializer, (dict,), gettext_lazy("an object")),
    (serializers.Field, (str,), gettext_lazy("a string")),
)


def json_type_problem(field, value) -> str:
    """Why ``value`` is not of the JSON type (and date format) the schema gives ``field`` ("" when it is). DRF
    would turn 12 into "12", "1.0" into 1, "yes" into True and "20261201" into a date: what the schema
    refuses, the API refuses."""
    if value is None:
        return ""  # the field's own allow_null decides
    if isinstance(field, serializers.DateTimeField) and not (isinstance(value, str)
                                                             and RFC3339_DATETIME.match(value)):
        return _("Must be a date and time such as 2026-12-01T09:00:00Z.")
    if isinstance(field, serializers.DateField) and not (isinstance(value, str) and RFC3339_DATE.match(value)):
        return _("Must be a date such as 2026-12-01.")
    for field_class, types, what in JSON_TYPES:
        if isinstance(field, field_class):
            if isinstance(value, bool) and bool not in types:
                return _("Must be %(what)s, not true or false.") % {"what": what}
            if not isinstance(value, types):
                return _("Must be %(what)s.") % {"what": what}
            break
    children = (value if isinstance(field, serializers.ListField) else
                value.values() if isinstance(field, serializers.DictField) else ())
    for item in children:
        if problem := json_type_problem(field.child, item):
            return problem
    return ""


class RequestSerializer(serializers.Serializer):
    """Base of every API request body: each field takes exactly the JSON type the schema gives it (a 400
    naming the field otherwise), then its own limits; the fields' messages name their limits
    (``text_field``, ``whole_number_field``, ``number_field``)."""

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            return super().to_internal_value(data)
        type_errors = {name: [problem] for name, field in self.fields.items()
                       if not field.read_only and name in data and (problem := json_type_problem(field, data[name]))}
        try:
            value = super().to_internal_value({k: v for k, v in data.items() if k not in type_errors})
        except exceptions.ValidationError as exc:
            raise exceptions.ValidationError({**exc.detail, **type_errors}) from None
        if type_errors:
            raise exceptions.ValidationError(type_errors)
        return value


#: Characters that count as space: Python's (what ``str.strip`` removes) and JSON Schema's (ECMAScript ``\s``),
#: spelled out so that the schema's pattern and the check agree in both languages.
SPACES = r"\t\n\v\f\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


class TextPattern(RegexValidator):
    """The schema's pattern of a text field: no NUL and, unless blank, one character that is not a space. It
    checks the second part only: DRF's own validators already refuse NUL and lone surrogates, with their
    own message."""

    def __init__(self, blank: bool, message):
        super().__init__(r"^[^\x00]*$" if blank else rf"^[^\x00]*[^{SPACES}\x00][^\x00]*$", message)
        self.blank = blank

    def __call__(self, value):
        if not self.blank and not re.search(rf"[^{SPACES}\x00]", str(value)):
            raise DjangoValidationError(self.message, code="blank")


def text_field(max_length: int, *, required: bool = True, blank: bool = False, label=None,
               **kwargs) -> serializers.CharField:
    """A string of at most ``max_length`` characters (documented as maxLength) without NUL; unless ``blank``,
    with at least one character that is not a space ("<label> is required." otherwise). Both are in the
    schema's pattern."""
    required_message = (format_lazy(gettext_lazy("{label} is required."), label=label) if label
                        else gettext_lazy("Give at least one character that is not a space."))
    validators = [*kwargs.pop("validators", []), TextPattern(blank, required_message)]
    return serializers.CharField(
        max_length=max_length, required=required, allow_blank=blank, validators=validators, trim_whitespace=False,
        error_messages={"max_length": gettext_lazy("At most {max_length} characters."), "blank": required_message},
        **kwargs)


def whole_number_field(minimum: int, maximum: int, **kwargs) -> serializers.IntegerField:
    """A JSON integer from ``minimum`` to ``maximum`` (both documented)."""
    return serializers.IntegerField(min_value=minimum, max_value=maximum, error_messages={
        "min_value": gettext_lazy("Must be at least {min_value}."),
        "max_value": gettext_lazy("Must be at most {max_value}.")}, **kwargs)


def number_field(minimum: float, maximum: float, **kwargs) -> serializers.FloatField:
    """A finite JSON number from ``minimum`` to ``maximum`` (both documented)."""
    return serializers.FloatField(min_value=minimum, max_value=maximum, error_messages={
        "min_value": gettext_lazy("Must be at least {min_value}."),
        "max_value": gettext_lazy("Must be at most {max_value}.")}, **kwargs)


def choose_from(fields: dict, name: str, values, what: str) -> None:
    """Make ``fields[name]``, when there is one, a choice among ``values`` (the schema lists them as its enum),
    unless there are none yet; ``what`` names them in the message."""
    values = sorted(values)
    if not values or name not in fields:
        return
    old = fields[name]
    message = _("Unknown %(what)s %(input)s; choose one of: %(choices)s.") % {
        "input": "{input!r}", "what": what, "choices": ", ".join(values).replace("{", "{{").replace("}", "}}")}
    fields[name] = serializers.ChoiceField(choices=values, required=old.required, help_text=old.help_text,
                                          error_messages={"invalid_choice": message})


class DecimalText(serializers.DecimalField):
    """A decimal number written as a string of digits (``"2.5"``), as the schema's pattern says; DRF alone
    would also take ``" 2.5"``, ``".5"`` or a JSON number."""

    def __init__(self, *, whole_digits: int, decimal_places: int, **kwargs):
        self.pattern = rf"^[0-9]{{1,{whole_digits}}}(\.[0-9]{{1,{decimal_places}}})?$"
        super().__init__(max_digits=whole_digits + decimal_places, decimal_places=decimal_places, **kwargs)
        self._spectacular_annotation = {"field": {"type": "string", "format": "decimal", "pattern": self.pattern}}

    def to_internal_value(self, data):
        if not isinstance(data, str) or not re.fullmatch(self.pattern, data):
            self.fail("invalid")
        return super().to_internal_value(data)


# --- pages and filters -------------------------------------------------------------------------------------


def query_numbers(request, bounds: dict[str, tuple[int, int]]) -> dict[str, int]:
    """Whole-number query parameters present in the request, each once and within its bounds; a 400 naming
    each one that is not (``page=0``, ``page_size=-6.1e-05``, ``page=last``, a repeated parameter)."""
    errors: dict[str, str] = {}
    values = {}
    for name, (minimum, maximum) in bounds.items():
        given = request.query_params.getlist(name)
        if not given:
            continue
        if len(given) > 1:
            errors[name] = _("Give %(name)s once.") % {"name": name}
            continue
        value = whole_number(errors, {name: given[0]}, name, minimum, maximum, name)
        if value is not None:
            values[name] = value
    if errors:
        raise exceptions.ValidationError({field: [message] for field, message in errors.items()})
    return values


class CountedBy:
    """Rows for a paginator, counted by another queryset: the objects chosen rather than the values read for them.

    The count of a ``values_list`` that reads names across foreign keys keeps those joins (the API job list: 4 of
    its 6 ms of database time at 5,600 jobs); the objects chosen are as many when every name read is
    single-valued, which the caller vouches for."""

    def __init__(self, rows, chosen):
        self.rows, self.chosen = rows, chosen

    @property
    def ordered(self) -> bool:
        return self.rows.ordered

    def count(self) -> int:
        return self.chosen.count()

    def __getitem__(self, index):
        return self.rows[index]

    def __len__(self) -> int:
        return self.count()


class StandardPagination(PageNumberPagination):
    """`{"count", "next", "previous", "results"}`; clients may ask for up to 500 rows a page (more gives 500).
    ``page`` and ``page_size`` are whole numbers from 1 (400 otherwise); a page past the last is a 404."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
    last_page_strings = ()

    def paginate_queryset(self, queryset, request, view=None):
        query_numbers(request, {"page": (1, MAX_PAGE), "page_size": (1, MAX_PAGE)})
        return super().paginate_queryset(queryset, request, view)

    def get_schema_operation_parameters(self, view):
        return [
            {"name": "page", "required": False, "in": "query",
             "description": "Which page, from 1; a page past the last answers 404.",
             "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 1}},
            {"name": "page_size", "required": False, "in": "query",
             "description": f"Rows a page; more than {self.max_page_size} gives {self.max_page_size}.",
             "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": self.page_size}},
        ]


FIELD_ERROR_STATUSES = (400, 409, 422)


# --- errors ------------------------------------------------------------------------------------------------


def field_map(detail, prefix: str = "") -> dict[str, list[str]]:
    """DRF or Django error details as ``{"field": ["message"]}``, nested fields dotted (``checkpoint.path``,
    ``artifacts.0.name``); messages without a field under ``non_field_errors``."""
    if isinstance(detail, dict):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            name = "non_field_errors" if key == "detail" and not prefix else str(key)
            flat.update(field_map(value, f"{prefix}.{name}" if prefix else name))
        return flat
    if isinstance(detail, list | tuple):
        if any(isinstance(item, dict | list) for item in detail):
            flat = {}
            for index, item in enumerate(detail):
                flat.update(field_map(item, f"{prefix}.{index}" if prefix else str(index)))
            return flat
        return {prefix or "non_field_errors": [str(item) for item in detail]} if detail else {}
    return {prefix or "non_field_errors": [str(detail)]}


def _unique_fields(exc: IntegrityError) -> list[str] | None:
    """The columns of the unique constraint ``exc`` broke (PostgreSQL's "Key (a, b)=(…) already exists."),
    None when it is another kind of integrity error."""
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) != "23505":
        return None
    detail = getattr(getattr(cause, "diag", None), "message_detail", "") or ""
    match = re.match(r"Key \((.+?)\)=", detail)
    columns = [c.strip().strip('"') for c in match.group(1).split(",")] if match else []
    return [column.removesuffix("_id") for column in columns] or ["non_field_errors"]


def exception_handler(exc, context):
    """JSON errors that name the field; never a traceback (the module's docstring lists the statuses).

    The services shared with the pages raise Django's ValidationError after the request matched its schema,
    so it is a 422 keyed by field; a unique constraint broken by a concurrent identical request is a 409
    naming the unique fields, as is an action on an object that moved meanwhile (StateConflict); anything
    unexpected is logged and answered with a plain 500 body."""
    if isinstance(exc, StateConflict):
        exc = Conflict(exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages})
    elif isinstance(exc, DjangoValidationError):
        exc = Unprocessable(exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages})
    elif isinstance(exc, IntegrityError) and (fields := _unique_fields(exc)) is not None:
        message = _("Created at the same moment by another request: %(fields)s must be unique.") % {
            "fields": ", ".join(fields)}
        exc = Conflict({fields[-1]: [message]})
    elif isinstance(exc, OperationalError | InterfaceError):
        # a connection terminated or refused under the request (IntegrityError is a DatabaseError, not these)
        logger.warning("API request lost its database connection: %s", exc)
        exc = DatabaseUnavailable()
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = drf_exception_handler(exc, context)
    if response is None:
        logger.exception("Unhandled API error", exc_info=exc)
        return Response({"detail": "Internal error; it has been logged."}, status=status.HTTP_500_INTERNAL_SERVER_ERROR)
    if isinstance(exc, DatabaseUnavailable):
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    if response.status_code in FIELD_ERROR_STATUSES:
        response.data = field_map(response.data) or {"non_field_errors": [_("The request was refused.")]}
    elif not (isinstance(response.data, dict) and isinstance(response.data.get("detail"), str)):
        response.data = {"detail": "; ".join(message for messages in field_map(response.data).values()
                                             for message in messages)}
    return response

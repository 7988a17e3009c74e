"""The portal's one input policy: what any request may carry, and parsing what users typed, with messages
that name the field and the limit (shared by every service, the API and the pages).

Three places apply the same rules, so that no view needs a check of its own:

* ``InputPolicyMiddleware`` looks at every request before a view runs: the path, the query string and a
  form's fields may not hold characters that cannot be stored (NUL); the page or the API answers 400 naming
  the field.
* ``JSONObjectParser`` reads every API body: one JSON object (a list, a string, ``null``, malformed JSON or
  JSON nested too deeply is a 400 naming ``body``), and ``ContractFilterBackend`` every API query's filters.
* The serializers (API, ``gpuportal.web.api.RequestSerializer``: exact JSON types, declared limits, no NUL or lone
  surrogates) and the forms (pages) declare each field; the one validation function of an action (such as
  ``submission.validate_job_request``) parses values with ``parse_whole_number``, ``parse_moment`` and
  ``calendar_month`` below, which never let a malformed value through, and returns typed values. Each of its
  rules checks one field and ``refuse``s it; ``Refusals`` collects them, so every bad field is named at once
  in one ``ValidationError`` keyed by field.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime
from typing import NoReturn

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import escape
from django.utils.translation import gettext as _
from django_filters import (
    BooleanFilter,
    CharFilter,
    IsoDateTimeFilter,
    ModelMultipleChoiceFilter,
    MultipleChoiceFilter,
)
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import exceptions
from rest_framework.parsers import JSONParser

#: Years a month or a moment may have: within them every day, month and time-zone shift exists.
FIRST_YEAR, LAST_YEAR = 1970, 9998


def text_problem(value: str) -> str:
    """Why ``value`` cannot be stored as text ("" when it can): PostgreSQL refuses NUL, and a lone surrogate
    (``"\\ud800"``, which JSON escapes can carry) has no UTF-8 form."""
    if "\x00" in value:
        return _("contains a NUL character (\\x00), which text cannot hold.")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return _("contains a lone surrogate (U+%(code)04X), which is not a character.") % {
                "code": ord(value[exc.start])}
    return ""


def refuse(field: str, message: str) -> NoReturn:
    """Refuse ``field`` with ``message``: how a rule that checks one field answers (``Refusals`` collects it)."""
    raise ValidationError({field: message})


class Refusals:
    """The refusals of one request's fields, collected in one place: each rule checks its own field and raises
    (``refuse``), and every bad field is still reported at once, as one ``ValidationError`` keyed by field."""

    def __init__(self):
        self.by_field: dict[str, list[str]] = {}

    def attempt(self, rule, *args):
        """``rule(*args)``, or None with its refusal kept (a later refusal of the same field replaces it)."""
        try:
            return rule(*args)
        except ValidationError as exc:
            self.by_field.update(exc.message_dict)
            return None

    def __contains__(self, field: str) -> bool:
        return field in self.by_field

    def any_of(self, *fields: str) -> bool:
        return any(field in self.by_field for field in fields)

    def raise_any(self) -> None:
        if self.by_field:
            raise ValidationError(self.by_field)


def keyed(field: str, parse, *args):
    """``parse(*args)`` for a parser that refuses with a plain ``ValidationError`` (``parse_whole_number``,
    ``parse_moment``), its refusal keyed by ``field``."""
    try:
        return parse(*args)
    except ValidationError as exc:
        raise ValidationError({field: exc.messages}) from None


def parse_whole_number(raw, minimum: int, maximum: int, label: str, too_large: str | None = None) -> int:
    """A whole number within [minimum, maximum] from ``raw`` (typed, or text as a form gives it);
    ``ValidationError`` with a message naming the label and the limit otherwise."""
    if raw in (None, ""):
        raise ValidationError(_("%(label)s is required.") % {"label": label})
    try:
        if isinstance(raw, bool) or (isinstance(raw, str) and len(raw) > 40):
            raise ValueError
        value = int(raw)
        if isinstance(raw, float) and raw != value:
            raise ValueError
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(float("inf"))
        raise ValidationError(_("%(label)s must be a whole number, not %(value)s.") % {
            "label": label, "value": _shown(raw)}) from None
    if value < minimum:
        raise ValidationError(_("%(label)s must be at least %(min)d (got %(value)d).") % {
            "label": label, "min": minimum, "value": value})
    if value > maximum:
        raise ValidationError((too_large or _("%(label)s must be at most %(max)d (got %(value)d).")) % {
            "label": label, "max": maximum, "value": value})
    return value


def whole_number(errors: dict, data: dict, field: str, minimum: int, maximum: int, label: str,
                 too_large: str | None = None) -> int | None:
    """``parse_whole_number`` of ``data[field]``; on failure record its message under ``field``."""
    try:
        return parse_whole_number(data.get(field), minimum, maximum, label, too_large)
    except ValidationError as exc:
        errors[field] = exc.messages[0]
        return None


def parse_moment(raw, label: str) -> datetime:
    """An ISO date and time (``2026-12-01T09:00``, an offset optional; local time without one) from ``raw``;
    ``ValidationError`` naming the label otherwise. Impossible dates (``2026-02-30``), hours (25), offsets
    (``+99:00``) and years outside ``FIRST_YEAR``..``LAST_YEAR`` are refused, not raised."""
    value = None
    if isinstance(raw, datetime):
        value = raw
    elif isinstance(raw, str) and len(raw) <= 64:
        try:
            value = parse_datetime(raw.strip())
        except (ValueError, OverflowError):
            value = None
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value) if FIRST_YEAR <= value.year <= LAST_YEAR else None
    if value is None or not FIRST_YEAR <= value.year <= LAST_YEAR:
        raise ValidationError(_("%(label)s: give a date and time such as 2026-12-01T09:00 (years %(first)d to "
                                "%(last)d).") % {"label": label, "first": FIRST_YEAR, "last": LAST_YEAR})
    return value


def calendar_month(text) -> date:
    """``YYYY-MM`` -> the first day of that month; ValueError naming the expected form and the years otherwise."""
    try:
        if not isinstance(text, str) or len(text) != 7:
            raise ValueError
        parsed = datetime.strptime(text, "%Y-%m").date()
        if not FIRST_YEAR <= parsed.year <= LAST_YEAR:
            raise ValueError
    except ValueError:
        raise ValueError(_("month must look like 2026-10 (YYYY-MM, years %(first)d to %(last)d), not %(value)s.")
                         % {"first": FIRST_YEAR, "last": LAST_YEAR, "value": _shown(text)}) from None
    return parsed


def _shown(raw) -> str:
    """A value as a message may quote it: short, and without characters that cannot be stored."""
    text = repr(raw)
    return text if len(text) <= 40 else text[:37] + "..."


def request_problems(request) -> dict[str, str]:
    """What no view could store, keyed by field: NUL in the path, in a query parameter (name or value) or in
    a form field. Lone surrogates cannot come this way (Django decodes URLs and forms with replacement)."""
    problems: dict[str, str] = {}
    if "\x00" in request.path:
        problems["path"] = text_problem(request.path)
    sources = [request.GET]
    if (request.method == "POST" and not request.path.startswith("/api/")  # the API reads JSON only
            and request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data")):
        if (size := _content_length(request)) > settings.MAX_FORM_BODY_BYTES:
            # Refused before the body is read: Django would spool an upload to disk before any form's own limit.
            problems["body"] = _("The form is %(size).1f MB; the portal takes at most %(limit).0f MB.") % {
                "size": size / 2**20, "limit": settings.MAX_FORM_BODY_BYTES / 2**20}
            return problems
        try:
            sources.append(request.POST)
        except MultiPartParserError:
            problems["body"] = _("The form could not be read (malformed multipart data).")
    for source in sources:
        for key, values in source.lists():
            if problem := text_problem(key):
                problems[_shown(key)] = problem
            for value in values:
                if problem := text_problem(value):
                    problems[key] = problem
    return problems


def _content_length(request) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


class InputPolicyMiddleware:
    """Answers 400 before any view runs when the path, the query or a form carries what cannot be stored:
    JSON ``{field: [message]}`` under ``/api/``, a short page naming the field elsewhere. Under ``/api/`` a URL
    that no operation matches (``/api/jobs/0.5/``) is a JSON 404, like every other API error."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        problems = request_problems(request)
        if not problems:
            response = self.get_response(request)
            if (response.status_code == 404 and request.path.startswith("/api/")
                    and not response.get("Content-Type", "").startswith("application/json")):
                return JsonResponse({"detail": _("Not found.")}, status=404)
            return response
        if request.path.startswith("/api/"):
            return JsonResponse({field: [message] for field, message in problems.items()}, status=400,
                                json_dumps_params={"ensure_ascii": True})
        lines = "".join(f"<li><strong>{escape(field)}</strong>: {escape(message)}</li>"
                        for field, message in problems.items())
        title = escape(_("The request was refused"))
        return HttpResponse(f"<!doctype html><title>{title}</title><h1>{title}</h1><ul>{lines}</ul>",
                            status=400, content_type="text/html; charset=utf-8")


def _not_json(constant: str):
    raise ValueError(f"{constant} is not JSON")


class JSONObjectParser(JSONParser):
    """The only body an API operation takes: one JSON object of at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes.

    Anything else is a 400 naming ``body``: a list, a string or ``null`` as the body, malformed JSON (``NaN``
    and ``Infinity`` are not JSON), nesting too deep for the parser; another content type is DRF's 415. The
    fields themselves are the serializers' (``gpuportal.web.api.RequestSerializer``): DRF's text fields refuse
    NUL and lone surrogates, its number fields what is not finite; keys no operation knows are ignored."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if limit else stream.read()
        if limit and len(raw) > limit:
            raise exceptions.ParseError({"body": [_("The body is larger than %(max)d bytes.") % {"max": limit}]})
        try:
            data = json.loads(raw.decode(encoding), parse_constant=_not_json)
        except RecursionError:
            raise exceptions.ParseError({"body": [_("The JSON is nested too deeply.")]}) from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise exceptions.ParseError({"body": [_("Malformed JSON: %(error)s") % {"error": exc}]}) from None
        if not isinstance(data, dict):
            raise exceptions.ParseError({"body": [_("The body must be a JSON object ({...}), not %(type)s.") % {
                "type": type(data).__name__.replace("NoneType", "null")}]})
        return data


#: An RFC 3339 date and time, as the schema's ``date-time`` format means it (Python would take more).
RFC3339_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
RFC3339_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def filter_value_problem(spec, value: str) -> str:
    """Why ``value`` is not what the schema says filter ``spec`` takes ("" when it is). django-filter would
    read an empty value as "no filter", anything but true/false as "no filter" for a boolean, and an ISO
    date and time in more forms than RFC 3339's."""
    if isinstance(spec, BooleanFilter):
        return "" if value in ("true", "false") else _("Give true or false.")
    if value == "" and not isinstance(spec, CharFilter):
        return _("Give a value, or leave the parameter out.")
    if isinstance(spec, IsoDateTimeFilter) and not RFC3339_DATETIME.match(value):
        return _("Give a date and time such as 2026-12-01T09:00:00Z.")
    return ""


class ContractFilterBackend(DjangoFilterBackend):
    """django-filter with the schema's word kept (``filter_value_problem``), and no filter given twice unless
    it takes several values."""

    def get_filterset(self, request, queryset, view):
        filterset = super().get_filterset(request, queryset, view)
        if filterset is not None:
            errors = {}
            for name, spec in filterset.filters.items():
                given = request.query_params.getlist(name)
                problems = [problem for value in given if (problem := filter_value_problem(spec, value))]
                if problems:
                    errors[name] = problems[:1]
                elif len(given) > 1 and not isinstance(spec, MultipleChoiceFilter | ModelMultipleChoiceFilter):
                    errors[name] = [_("Give %(name)s once.") % {"name": name}]
            if errors:
                raise exceptions.ValidationError(errors)
        return filterset

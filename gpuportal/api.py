"""Shared REST API pieces: pagination and the error format every endpoint answers with."""

import logging

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

logger = logging.getLogger(__name__)


#: The ``Idempotency-Key`` header as the OpenAPI schema documents it (gpuportal/idempotency.py).
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
    description="A key of your choice (up to 255 printable ASCII characters): sending the same request with "
                "the same key again returns the first answer (header Idempotent-Replayed: true) instead of "
                "creating a duplicate. The same key with another body answers 422.")


class StandardPagination(PageNumberPagination):
    """`{"count", "next", "previous", "results"}`; clients may ask for up to 500 rows a page."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


def exception_handler(exc, context):
    """JSON errors that name the field; never a traceback.

    Django's own ValidationError (raised by services shared with the pages) becomes a 400 keyed by field,
    exactly like a serializer error; anything unexpected is logged and answered with a plain 500 body.
    """
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        exc = exceptions.ValidationError(detail)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = drf_exception_handler(exc, context)
    if response is None:
        logger.exception("Unhandled API error", exc_info=exc)
        return Response({"detail": "Internal error; it has been logged."}, status=status.HTTP_500_INTERNAL_SERVER_ERROR)
    return response

"""API-wide pieces: pagination with a total count, the one error shape {message, code, extra},
strict input serializers. Loaded by DRF's settings while rest_framework.generics is being imported, so
this module must not import drf_spectacular or DRF views (circular import).

Services raise plain Django/domain exceptions (ValidationError, PermissionDenied, QuotaDenied,
JobConflict, backend errors); ``exception_handler`` is the single place that turns them into HTTP
answers, so views stay thin and no expected failure becomes a 500.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

logger = logging.getLogger(__name__)


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request: Any) -> int | None:
        # DRF silently falls back to the default for a page_size it cannot parse; the schema says a
        # positive integer, so anything else is a 400 (over the maximum is capped, as documented).
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None:
            try:
                if int(raw) < 1:
                    raise ValueError(raw)
            except ValueError:
                raise exceptions.ValidationError(
                    {self.page_size_query_param: ["A positive integer is required."]}
                ) from None
        return super().get_page_size(request)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] in {self.page_query_param, self.page_size_query_param}:
                parameter["schema"] = {**parameter["schema"], "minimum": 1}
        return parameters

    def get_paginated_response(self, data: Any) -> Response:
        assert self.page is not None
        return Response(
            {
                "count": self.page.paginator.count,
                "next": self.get_next_link(),
                "previous": self.get_previous_link(),
                "results": data,
            }
        )

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["count", "results"],
            "properties": {
                "count": {"type": "integer"},
                "next": {"type": "string", "nullable": True, "format": "uri"},
                "previous": {"type": "string", "nullable": True, "format": "uri"},
                "results": schema,
            },
        }


class ErrorSerializer(serializers.Serializer):
    """The one error shape of every non-2xx answer (for the OpenAPI schema)."""

    message = serializers.CharField()
    code = serializers.CharField()
    extra = serializers.DictField()


class StrictInputMixin:
    """Refuse unknown fields (400) instead of silently ignoring them: a typo such as ``gpu_mili``
    would otherwise submit a job without the GPU share its author asked for."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            known = {name for name, f in self.fields.items() if not f.read_only}  # type: ignore[attr-defined]
            unknown = sorted(str(key) for key in data if key not in known)
            if unknown:
                raise serializers.ValidationError({key[:100]: ["Unknown field."] for key in unknown[:20]})
        return super().to_internal_value(data)  # type: ignore[misc]


def _error(status_code: int, message: str, code: str, extra: dict[str, Any] | None = None) -> Response:
    return Response({"message": message, "code": code, "extra": extra or {}}, status=status_code)


def _django_validation_fields(exc: DjangoValidationError) -> dict[str, list[str]]:
    if hasattr(exc, "error_dict"):
        return {field: list(messages) for field, messages in exc.message_dict.items()}
    return {"non_field_errors": list(exc.messages)}


def _summary(fields: Any) -> str:
    if isinstance(fields, dict) and fields:
        names = [str(name) for name in fields if name != "non_field_errors"]
        if not names:
            first = fields.get("non_field_errors")
            if isinstance(first, list) and first:
                return str(first[0])
        return "Invalid input: " + ", ".join(names[:10]) + "."
    return "Invalid input."


def _domain_error(exc: Exception) -> Response | None:
    """Answers for the exceptions services raise (imports are late: apps import this module's users)."""
    from jobs.cluster import BackendNotAvailable
    from jobs.services import IllegalTransition, JobConflict
    from quotas.services import QuotaDenied
    from scheduler.backends.base import BackendError

    if isinstance(exc, DjangoValidationError):
        fields = _django_validation_fields(exc)
        return _error(400, _summary(fields), "invalid", {"fields": fields})
    if isinstance(exc, QuotaDenied):
        return _error(409, exc.message, "quota_exceeded", {"limit": exc.field})
    if isinstance(exc, JobConflict | IllegalTransition):
        return _error(409, str(exc), "conflict")
    if isinstance(exc, BackendError | BackendNotAvailable):
        return _error(503, f"The cluster backend is unavailable: {exc}", "backend_unavailable")
    if isinstance(exc, SuspiciousOperation):
        return _error(400, str(exc) or "Bad request.", "bad_request")
    if isinstance(exc, OverflowError):
        # A number too large for the database (an id or count from a query string): bad input, not
        # a server fault. Filters and serializers bound their numbers; this is the net under them.
        return _error(400, "A number in the request is out of range.", "out_of_range")
    return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DjangoPermissionDenied):
        # DRF would replace the service's message with a generic one; keep it, it says why.
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = drf_exception_handler(exc, context)
    if response is None:
        response = _domain_error(exc)
        if response is None:
            # Unexpected: log it with the traceback and still answer in the one shape.
            logger.error("unhandled error in %s", context.get("view"), exc_info=exc)
            response = _error(500, "Internal error; the operators have been told.", "server_error")
        set_rollback()
        return response
    data = response.data
    code = getattr(exc, "default_code", "error")
    if isinstance(data, dict) and "detail" in data and len(data) == 1:
        message = str(data["detail"])
        code = getattr(data["detail"], "code", code)
        extra: dict[str, Any] = {}
    else:
        fields = data if isinstance(data, dict) else {"non_field_errors": data}
        message = _summary(fields) if response.status_code == 400 else "Request failed."
        extra = {"fields": fields}
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        # DRF already sets the Retry-After header; clients reading only the body get it too.
        extra = {"retry_after": max(1, math.ceil(exc.wait))}
    response.data = {"message": message, "code": str(code), "extra": extra}
    return response


def _error_json(status_code: int, message: str, code: str) -> JsonResponse:
    return JsonResponse({"message": message, "code": code, "extra": {}}, status=status_code)


@csrf_exempt  # as DRF views are: a POST to an unknown path is a 404, not a CSRF page
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """Catch-all under /api/: a path no API route matches (an unknown endpoint, a non-integer id)
    answers 404 in the one error shape, not with the portal's HTML page (also when DEBUG is on)."""
    return _error_json(404, "No API endpoint at this path.", "not_found")


def is_api_path(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/")


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Root 404 handler: JSON under /api/, the portal's page elsewhere."""
    if is_api_path(request):
        return api_not_found(request)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception or Exception("not found"))


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Root 400 handler (a bad Host header, a body over the upload limit outside DRF)."""
    if is_api_path(request):
        # Fixed text: Django's messages here (DisallowedHost) name settings an outsider need not see.
        return _error_json(400, "Bad request.", "bad_request")
    from django.views.defaults import bad_request

    return bad_request(request, exception or Exception("bad request"))


def handler403(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request):
        return _error_json(403, "Forbidden.", "permission_denied")
    from django.views.defaults import permission_denied

    return permission_denied(request, exception or Exception("forbidden"))


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: JSON under /api/ (a session-authenticated write without the token)."""
    if is_api_path(request):
        return _error_json(403, "CSRF check failed; send the X-CSRFToken header.", "csrf_failed")
    from django.views.csrf import csrf_failure as django_csrf_failure

    return django_csrf_failure(request, reason=reason)


def handler500(request: HttpRequest) -> HttpResponse:
    """Root 500 handler (errors outside DRF views, e.g. in middleware): JSON under /api/."""
    if is_api_path(request):
        return _error_json(500, "Internal error; the operators have been told.", "server_error")
    from django.views.defaults import server_error

    return server_error(request)

"""The API's outer boundary: body size limit and one error shape for errors raised outside DRF.

DRF reads the request stream itself, so Django's DATA_UPLOAD_MAX_MEMORY_SIZE never fires for API
views; this middleware refuses a declared body over NOTIFIER_API_MAX_BODY_BYTES with 413 before
anything reads it. (A body without Content-Length reaches Django as empty: WSGI's LimitedStream
reads 0 bytes, so chunked uploads cannot bypass the limit.) An app may give one path a limit of
its own, and the input field its 413 names (`body_limit_register`: the batch send's `messages`).
For /api/ paths it also turns Django's HTML 404/405/500 pages and dependency outages into the
JSON error shape, and adds the RateLimit-Limit / RateLimit-Remaining / RateLimit-Policy headers
of the client's window.
A path or query parameter holding NUL or a lone surrogate (core/api/text.py) is a 400 naming
`path` or the parameter, before any view can hand it to the database.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from core.api.errors import _CODES, OUTAGE_RETRY_AFTER_SECONDS, error_body, is_outage
from core.api.text import MESSAGE, is_clean

logger = logging.getLogger(__name__)
API_PREFIX = "/api/"


@dataclass(frozen=True)
class BodyLimit:
    limit: Callable[[], int]  # read per request, so a settings override applies
    field: str


_path_limits: dict[str, BodyLimit] = {}


def body_limit_register(path: str, limit: Callable[[], int], field: str) -> None:
    """Give `path` its own body limit, whose 413 names `field` (the platform imports no app:
    the app registers from its AppConfig.ready())."""
    _path_limits[path] = BodyLimit(limit, field)


def _error(status: int, message: str, headers: dict[str, str] | None = None,
           fields: dict[str, list[str]] | None = None) -> JsonResponse:
    response = JsonResponse(error_body(_CODES.get(status, "error"), message, fields), status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


class ApiBoundaryMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        refused = self._oversize(request) or self._unclean(request)
        if refused:
            return refused
        response = self._shape(self.get_response(request))
        decision = getattr(request, "notifier_rate_limit", None)
        if decision is not None:
            # draft-ietf-httpapi-ratelimit-headers: what is left in this client's window.
            response["RateLimit-Limit"] = str(decision.rate.limit)
            response["RateLimit-Remaining"] = str(max(decision.rate.limit - decision.hits, 0))
            response["RateLimit-Policy"] = f"{decision.rate.limit};w={decision.rate.period_seconds}"
        return response

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not request.path.startswith(API_PREFIX):
            return None
        if is_outage(exc):
            logger.warning("dependency unavailable: %s", exc)
            return _error(503, "Service temporarily unavailable; retry later.",
                          {"Retry-After": str(OUTAGE_RETRY_AFTER_SECONDS)})
        logger.exception("unhandled API error on %s", request.path)
        return _error(500, "Internal error; it has been logged.")

    @staticmethod
    def _oversize(request: HttpRequest) -> HttpResponse | None:
        own = _path_limits.get(request.path)
        limit = own.limit() if own else settings.NOTIFIER_API_MAX_BODY_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _error(400, "Invalid Content-Length header.")
        if length > limit:
            message = f"Request body is {length} bytes; the limit is {limit} bytes."
            return _error(413, message, fields={own.field: [message]} if own else None)
        return None

    @staticmethod
    def _unclean(request: HttpRequest) -> HttpResponse | None:
        fields = {name: [MESSAGE] for name, values in request.GET.lists()
                  if not is_clean(name) or not all(is_clean(value) for value in values)}
        if not is_clean(request.path):
            fields["path"] = [MESSAGE]
        if not fields:
            return None
        return _error(400, f"Invalid input in: {', '.join(sorted(fields))}.", fields=fields)

    @staticmethod
    def _shape(response: HttpResponse) -> HttpResponse:
        """Django's own error pages (HTML) become the JSON shape; DRF's are already JSON."""
        if response.status_code < 400 or "json" in response.get("Content-Type", ""):
            return response
        messages = {404: "Not found.", 405: "Method not allowed.", 500: "Internal error."}
        shaped = _error(response.status_code, messages.get(response.status_code, "Request failed."))
        if "Allow" in response:
            shaped["Allow"] = response["Allow"]
        return shaped

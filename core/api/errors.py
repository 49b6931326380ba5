"""One JSON error shape for every API error: {"error": {"code", "message", "fields"}}.

`fields` maps each offending input field, named by its JSON path (`to`, `schedule.send_at`,
`recipients.contacts[1].email`), to its messages, so a caller can tell exactly what to fix: one
flat mapping whatever the nesting. Errors about the whole body appear under "non_field_errors".

A dependency outage (PostgreSQL or Redis unreachable) is a 503 with `Retry-After`, never a 500:
the request was fine, the service is degraded. Errors raised outside DRF (URL not found, body
too large) get the same shape from `core.api.middleware`.
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from django.db import DatabaseError, InterfaceError, OperationalError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler

_CODES = {
    status.HTTP_400_BAD_REQUEST: "invalid",
    status.HTTP_401_UNAUTHORIZED: "unauthenticated",
    status.HTTP_403_FORBIDDEN: "forbidden",
    status.HTTP_404_NOT_FOUND: "not_found",
    status.HTTP_405_METHOD_NOT_ALLOWED: "method_not_allowed",
    status.HTTP_409_CONFLICT: "conflict",
    status.HTTP_413_REQUEST_ENTITY_TOO_LARGE: "too_large",
    status.HTTP_415_UNSUPPORTED_MEDIA_TYPE: "unsupported_media_type",
    status.HTTP_429_TOO_MANY_REQUESTS: "rate_limited",
    status.HTTP_503_SERVICE_UNAVAILABLE: "unavailable",
}


class Conflict(exceptions.APIException):
    """409: the request is well formed but the object's state refuses it (an illegal campaign
    transition, an archived topic, re-subscribing a bounced address); the message says why."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


def _flatten(detail: Any) -> list[str]:
    if isinstance(detail, dict):
        return [f"{key}: {msg}" for key, value in detail.items() for msg in _flatten(value)]
    if isinstance(detail, list):
        return [msg for item in detail for msg in _flatten(item)]
    return [str(detail)]


def _child_path(path: str, key: str | int) -> str:
    """`schedule.send_at`, `recipients.contacts[1].email`: the JSON path the caller sent."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _fields(detail: Any, path: str = "") -> dict[str, list[str]]:
    """Every error of a (nested) DRF detail under the JSON path of its field: one flat mapping,
    so a caller looks a field up by the path it sent (decision 97). A nested serializer's
    `non_field_errors` belong to the object itself (`schedule`), not to a field named so."""
    if isinstance(detail, dict):
        fields: dict[str, list[str]] = {}
        for key, value in detail.items():
            child = path if path and key == api_settings.NON_FIELD_ERRORS_KEY else _child_path(path, key)
            for name, messages in _fields(value, child).items():
                fields.setdefault(name, []).extend(messages)
        return fields
    if isinstance(detail, list) and any(isinstance(item, dict | list) for item in detail):
        # A list serializer's errors: one entry per item, empty for the valid ones.
        fields = {}
        for index, item in enumerate(detail):
            for name, messages in _fields(item, _child_path(path, index)).items():
                fields.setdefault(name, []).extend(messages)
        return fields
    messages = _flatten(detail)
    return {path or api_settings.NON_FIELD_ERRORS_KEY: messages} if messages else {}


def error_fields(detail: Any) -> dict[str, list[str]]:
    """A DRF error detail as the flat `fields` mapping of the error shape (decision 97): for an
    answer that carries errors of its own, such as one per item of a batch."""
    return _fields(detail)


def error_body(code: str, message: str, fields: dict[str, Any] | None = None) -> dict:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


logger = logging.getLogger(__name__)
# Errors that mean "a dependency is down", not "the request is bad".
OUTAGE_ERRORS: tuple[type[Exception], ...] = (
    OperationalError, InterfaceError, redis.ConnectionError, redis.TimeoutError,
    redis.BusyLoadingError, redis.ReadOnlyError,
)
OUTAGE_RETRY_AFTER_SECONDS = 5


def outage_response(exc: Exception) -> Response:
    """503 in the error shape, for a dependency outage anywhere in a request."""
    logger.warning("dependency unavailable: %s: %s", type(exc).__name__, exc)
    which = "Redis" if isinstance(exc, redis.RedisError) else "the database"
    body = error_body("unavailable", f"Service temporarily unavailable ({which}); retry later.")
    return Response(body, status=status.HTTP_503_SERVICE_UNAVAILABLE,
                    headers={"Retry-After": str(OUTAGE_RETRY_AFTER_SECONDS)})


def is_outage(exc: Exception) -> bool:
    return isinstance(exc, OUTAGE_ERRORS) or (
        isinstance(exc, DatabaseError) and "connection" in str(exc).lower()
    )


def _ways_to_authenticate(challenges: str) -> str:
    """'Api-Key, Bearer' -> "'Authorization: Api-Key <key>' or 'Authorization: Bearer <token>'"."""
    schemes = [challenge.split()[0] for challenge in challenges.split(",") if challenge.strip()]
    return " or ".join(f"'Authorization: {scheme} {'<token>' if scheme.lower() == 'bearer' else '<key>'}'"
                       for scheme in schemes)


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if is_outage(exc):
        return outage_response(exc)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    code = _CODES.get(response.status_code, "error")
    if isinstance(exc, exceptions.ValidationError):
        fields = _fields(exc.detail)
        names = ", ".join(sorted(fields)) or "request"
        message = f"Invalid input in: {names}."
    elif isinstance(exc, exceptions.NotAuthenticated) and getattr(exc, "auth_header", None):
        # DRF's "Authentication credentials were not provided." does not say how to provide
        # them; the view's WWW-Authenticate schemes do (`Api-Key, Bearer`), without core
        # knowing them. A Bearer credential is a token (RFC 6750), any other a key.
        fields = {}
        message = f"No credentials: send {_ways_to_authenticate(exc.auth_header)}."
    else:
        fields = {}
        message = " ".join(_flatten(getattr(exc, "detail", str(exc)))) or "Not found."
    response.data = error_body(code, message, fields)
    return response

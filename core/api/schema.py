"""OpenAPI 3 (drf-spectacular) for the whole API: the error shape and the common answers.

`NotifierAutoSchema` is the project's DEFAULT_SCHEMA_CLASS, so every endpoint (any engineer's)
documents the error responses it can give without a line of its own:
  400 when it takes a body or parameters, 401/403 when it needs a key, 404 with a path id,
  409 + the `Idempotency-Key` header on idempotent POSTs, 413 on a POST/PUT, 415 when it reads
  a body, 429, 503.
Views still describe their bodies with @extend_schema (request/responses/examples), and an error
only they give with `error_response` (a 409 for a change the object's state forbids).
tests/openapi/test_schema_walk.py holds every operation to it.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from core.api.errors import _CODES
from core.api.fields import StrictInputMixin

_DESCRIPTIONS = {
    400: "Invalid input; `fields` names each bad field.",
    401: "Missing, wrong, revoked or expired API key or bearer token, or a scheme other than "
         "`Api-Key <key>` and `Bearer <token>`.",
    403: "The API key or bearer token lacks the scope this endpoint needs.",
    404: "No such object (or it belongs to another client).",
    409: "Idempotency-Key reused with a different request, or the first is still running.",
    413: "Request body larger than NOTIFIER_API_MAX_BODY_BYTES.",
    415: "Content-Type is not application/json.",
    429: "This client's rate limit is exhausted; see Retry-After.",
    503: "A dependency (database or Redis) is unavailable; see Retry-After.",
}


def error_example(status: int, message: str, fields: dict | None = None) -> OpenApiExample:
    body = {"error": {"code": _CODES[status], "message": message, "fields": fields or {}}}
    return OpenApiExample(f"{status} {_CODES[status]}", value=body, status_codes=[str(status)],
                          response_only=True)


_EXAMPLES = {
    400: error_example(400, "Invalid input in: to.", {"to": ["Enter a valid email address."]}),
    401: error_example(401, "Invalid API key."),
    403: error_example(403, "This credential lacks the 'send' scope."),
    404: error_example(404, "No such template."),
    409: error_example(409, "This Idempotency-Key was used with a different request."),
    413: error_example(413, "Request body is 5000000 bytes; the limit is 2097152 bytes."),
    415: error_example(415, 'Unsupported media type "text/plain" in request.'),
    429: error_example(429, "Request was throttled. Expected available in 12 seconds."),
    503: error_example(503, "Service temporarily unavailable (Redis); retry later."),
}


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.ChoiceField(choices=sorted({*_CODES.values(), "error"}))
    message = serializers.CharField()
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Each invalid input by its JSON path (`to`, `schedule.send_at`, "
                  "`recipients.contacts[1].email`) with its messages; `non_field_errors`: the body.",
    )


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


def error_response(status: int, description: str, message: str) -> OpenApiResponse:
    """An error answer one view adds to the shared ones of NotifierAutoSchema (a 409 for a change its
    object's state forbids): the same shape and example style, declared in one line."""
    return OpenApiResponse(ErrorSerializer, description=description,
                           examples=[error_example(status, message)])


IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
    description="Any unique string up to 255 ASCII characters (a UUID). Repeating the request "
                "with the same key replays the first response for 24 h; a different body is a 409.",
)


def _has_body(schema: AutoSchema) -> bool:
    return schema.method in ("POST", "PUT", "PATCH")


def _is_idempotent(schema: AutoSchema) -> bool:
    """A POST whose handler or view carries `idempotent = True` (the idempotency decorator marks
    the handler, the mixin its view class): a marker, so the platform imports no app."""
    handler = getattr(schema.view, schema.method.lower(), None)
    return schema.method == "POST" and (
        getattr(handler, "idempotent", False) or getattr(schema.view, "idempotent", False)
    )


class NotifierAutoSchema(AutoSchema):
    def get_summary(self) -> str | None:
        """An explicit extend_schema summary, else the first line of the handler's or view's
        docstring, so every operation in the docs says what it does."""
        summary = super().get_summary()
        if summary:
            return summary
        handler = getattr(self.view, self.method.lower(), None)
        for doc in (getattr(handler, "__doc__", None), type(self.view).__doc__):
            if doc and doc.strip():
                return doc.strip().splitlines()[0].rstrip(".")
        return None

    def get_serializer_name(self, serializer: Any, direction: str) -> str:
        """Nested Input/Output serializers (the styleguide's habit) are named after their view:
        MessageCreateApi.InputSerializer -> MessageCreateInput, so components never collide."""
        qualname = type(serializer).__qualname__
        if "." in qualname:
            outer, inner = qualname.rsplit(".", 1)
            outer = outer.replace(".", "").removesuffix("Api").removesuffix("View")
            return outer + inner.removesuffix("Serializer")
        return super().get_serializer_name(serializer, direction)

    def get_override_parameters(self) -> list[Any]:
        extra = [IDEMPOTENCY_HEADER] if _is_idempotent(self) else []
        return [*super().get_override_parameters(), *extra]

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict:
        schema = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and isinstance(serializer, StrictInputMixin):
            schema["additionalProperties"] = False
        return schema

    def _error_statuses(self) -> list[int]:
        statuses = [400, 429, 503]
        if self.get_auth():
            statuses += [401, 403]
        if "{" in self.path:
            statuses.append(404)
        if _has_body(self):
            statuses.append(413)  # core.api.middleware refuses any oversize body, read or not
            if self.get_request_serializer() is not None:
                statuses.append(415)  # only a body that is parsed can have the wrong type
        if _is_idempotent(self):
            statuses.append(409)
        return sorted(statuses)

    def _get_response_bodies(self, direction: str = "response") -> dict:
        responses = super()._get_response_bodies(direction)
        for status in self._error_statuses():
            if str(status) not in responses:
                responses[str(status)] = self._get_response_for_code(
                    OpenApiResponse(ErrorSerializer, description=_DESCRIPTIONS[status],
                                    examples=[_EXAMPLES[status]]),
                    str(status), direction=direction,
                )
        return responses

    def _get_response_headers_for_code(self, status_code: str, direction: str = "response") -> dict:
        headers = super()._get_response_headers_for_code(status_code, direction)
        if status_code.startswith("2") and _is_idempotent(self):
            headers["Idempotent-Replayed"] = {
                "schema": {"type": "string", "enum": ["true"]},
                "description": "Present when this is the stored answer to an earlier request "
                               "with the same Idempotency-Key: nothing was done again.",
            }
        if status_code in ("429", "503"):
            headers["Retry-After"] = {"schema": {"type": "integer"},
                                      "description": "Seconds to wait before retrying."}
        return headers


ERROR_CODES = sorted({*_CODES.values(), "error"})

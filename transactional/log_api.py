"""GET /api/v1/messages (the message log a service searches) and GET /api/v1/messages/{id}/events
(one message's history). Issue 29, decision 114."""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from audience.models import Stream
from clients.key_types import KeyType, caller_key_type
from clients.retention import metadata_visible_since
from clients.tenancy import owned_or_404
from core.api.fields import SafeEmailField, StrictInputMixin
from core.api.metadata import MAX_KEYS, MAX_VALUE_CHARS, metadata_key_error
from core.api.pagination import INVALID_CURSOR
from delivery.models import EmailMessage
from delivery.selectors import messages_visible
from templates.models import Template
from transactional.message_history import PER_SOURCE, message_history
from transactional.message_log import InvalidCursorError, LogCursor, LogFilters, within_retention

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
_METADATA_PARAM = re.compile(r"metadata\[(.*)\]", re.DOTALL)


class LogQuerySerializer(StrictInputMixin, serializers.Serializer):
    recipient = SafeEmailField(required=False, help_text="Exact address, any case.")
    status = serializers.ChoiceField(choices=EmailMessage.Status.values, required=False)
    template = serializers.CharField(required=False, max_length=100,
                                     help_text="One of your templates, by id or name.")
    campaign = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1)
    stream = serializers.ChoiceField(choices=Stream.values, required=False)
    created_after = serializers.DateTimeField(required=False, help_text="Inclusive (ISO 8601).")
    created_before = serializers.DateTimeField(required=False, help_text="Exclusive (ISO 8601).")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT,
                                     default=DEFAULT_LIMIT, help_text=f"1 to {MAX_LIMIT}.")
    cursor = serializers.CharField(required=False, max_length=200,
                                   help_text="The `next` of the previous page.")
    key_type = serializers.ChoiceField(
        choices=KeyType.values, required=False,
        help_text="`test`: a live or team key lists a test key's messages (a test key lists only those).")

    def validate_template(self, value: str) -> int:
        mine = Template.objects.filter(client_id=self.context["service_id"])
        match = Q(name=value) | Q(pk=int(value)) if value.isdigit() and len(value) < 19 else Q(name=value)
        template_id = mine.filter(match).values_list("pk", flat=True).first()
        if template_id is None:
            raise serializers.ValidationError("None of your templates has this id or name.")
        return template_id

    def validate_cursor(self, value: str) -> LogCursor:
        try:
            return LogCursor.decode(value)
        except InvalidCursorError:
            raise serializers.ValidationError(INVALID_CURSOR) from None

    def validate(self, attrs: dict) -> dict:
        after, before = attrs.get("created_after"), attrs.get("created_before")
        if after and before and after >= before:
            raise serializers.ValidationError({"created_before": ["Must be later than created_after."]})
        return attrs


def log_query(request: Request) -> tuple[dict, dict[str, str]]:
    """(the validated filters, the `metadata[<key>]` ones): a 400 names the parameter."""
    params: dict[str, Any] = {}
    metadata: dict[str, str] = {}
    errors: dict[str, list[str]] = {}
    for name in request.query_params:
        values = request.query_params.getlist(name)
        match = _METADATA_PARAM.fullmatch(name)
        if len(values) > 1:
            errors[name] = ["Give this parameter once."]
        elif match is None:
            params[name] = values[0]
        elif problem := metadata_key_error(match[1]) or _metadata_value_error(values[0]):
            errors[name] = [problem]
        else:
            metadata[match[1]] = values[0]
    if len(metadata) > MAX_KEYS:
        errors["metadata"] = [f"At most {MAX_KEYS} metadata filters."]
    query = LogQuerySerializer(data=params, context={"service_id": request.user.pk})
    if not query.is_valid():
        errors.update(query.errors)
    if errors:
        raise exceptions.ValidationError(errors)
    return query.validated_data, metadata


def _metadata_value_error(value: str) -> str | None:
    if len(value) > MAX_VALUE_CHARS:
        return f"At most {MAX_VALUE_CHARS} characters."
    return "NUL characters are not allowed." if "\x00" in value else None


def log_filters(data: dict, metadata: dict[str, str]) -> LogFilters:
    return LogFilters(
        recipient=data.get("recipient"), status=data.get("status"), template_id=data.get("template"),
        campaign_id=data.get("campaign"), stream=data.get("stream"),
        created_after=data.get("created_after"), created_before=data.get("created_before"),
        metadata=metadata)


def next_page_url(request: Request, rows: list[EmailMessage], limit: int) -> str | None:
    if len(rows) <= limit:
        return None
    last = rows[limit - 1]
    cursor = LogCursor(last.created_at, last.id).encode()
    return replace_query_param(request.build_absolute_uri(), "cursor", cursor)


LOG_PARAMETERS = [
    LogQuerySerializer,
    OpenApiParameter(
        "metadata", OpenApiTypes.OBJECT, OpenApiParameter.QUERY, style="deepObject", explode=True,
        description="Messages whose metadata has every given key with this value: "
                    "`metadata[order_id]=A-1001` (a number or true/false also matches the "
                    "number or boolean stored). Up to 20 keys.")
]
LOG_DESCRIPTION = (
    "Your service's messages, newest first (by creation time, then id), narrowed by every filter "
    "given. Cursor-paginated: follow `next` (null on the last page); a page never repeats or "
    "skips a message, and messages accepted while you page are newer than the first page (read "
    "them by starting again). `limit` 1-500 (default 50). A bad value is a 400 naming the "
    "parameter. Messages older than your `metadata_days` of their stream are not listed; "
    "`recipient` also finds messages past their personal retention (their address is null).")


class HistoryEventSerializer(serializers.Serializer):
    type = serializers.CharField(help_text="message.accepted, message.attempt, message.sent, "
                                           "message.delivered, message.bounced, ...")
    at = serializers.DateTimeField()
    source = serializers.ChoiceField(choices=["message", "attempt", "esp_event", "ambiguity",
                                              "dead_letter", "event_log"],
                                     help_text="Where it is recorded.")
    data = serializers.DictField(help_text="The type's own facts (provider, outcome, error...).")


class MessageEventsApi(APIView):
    required_scope = "send"
    throttle_scope = "send"

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        status = serializers.ChoiceField(choices=EmailMessage.Status.choices)
        events = HistoryEventSerializer(many=True, help_text="Oldest first.")

    class InputSerializer(StrictInputMixin, serializers.Serializer):
        key_type = serializers.ChoiceField(
            choices=KeyType.values, required=False,
            help_text="`test`: a live or team key reads a test key's message (a test key reads only those).")

    @extend_schema(summary="A message's history: accepted, each provider call, the ESP's events",
                   description="Everything recorded about one of your messages, oldest first: "
                               "its acceptance, schedule, each provider call (outcome, code, "
                               "duration), the ESP's events (delivered, opened, clicked, bounced, "
                               "complained), holds of an ambiguous send and its dead letter. At "
                               f"most {PER_SOURCE} of each kind.",
                   parameters=[InputSerializer], responses={200: OutputSerializer})
    def get(self, request: Request, message_id: int) -> Response:
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        rows = within_retention(EmailMessage.objects.all(), metadata_visible_since(request.user.service))
        queryset = messages_visible(rows, key_type=caller_key_type(request),
                                    asked=params.validated_data.get("key_type"))
        message = owned_or_404(queryset, request.user, message="No such message.", pk=message_id)
        events = [{"type": e.type, "at": e.at, "source": e.source, "data": e.data}
                  for e in message_history(message)]
        return Response(self.OutputSerializer(
            {"id": message.pk, "status": message.status, "events": events}).data)

"""GET /api/v1/events: the caller's service's own event log, followed with a cursor
(docs/api.md "Events", decision 115). What a callback receiver that was down reads to catch up."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clients.retention import metadata_visible_since
from eventlog.cursor import START, EventCursor, InvalidCursorError
from eventlog.payloads import event_payload
from eventlog.selectors import events_page, since_cursor
from eventlog.types import ALL_EVENT_TYPES

MAX_LIMIT = 1000


class EventsQuerySerializer(serializers.Serializer):
    after = serializers.CharField(
        required=False, max_length=100,
        help_text="The `next` of the previous answer: go on from there. Opaque.")
    since = serializers.DateTimeField(
        required=False,
        help_text="ISO 8601: start with the events recorded at or after this time (the first call "
                  "only; then follow `next`). Neither: from the oldest event kept.")
    types = serializers.CharField(
        required=False, max_length=1000,
        help_text=f"Comma-separated event types (default: all): {', '.join(ALL_EVENT_TYPES)}.")
    limit = serializers.IntegerField(required=False, default=100, min_value=1, max_value=MAX_LIMIT,
                                     help_text=f"Events per page, 1-{MAX_LIMIT} (default 100).")

    def validate_after(self, value: str) -> EventCursor:
        try:
            return EventCursor.decode(value)
        except InvalidCursorError as error:
            raise serializers.ValidationError(
                "Invalid cursor: use the `next` of an earlier answer.") from error

    def validate_types(self, value: str) -> list[str]:
        names = [name.strip() for name in value.split(",") if name.strip()]
        unknown = sorted(set(names) - set(ALL_EVENT_TYPES))
        if unknown or not names:
            raise serializers.ValidationError(
                f"Unknown event types: {', '.join(unknown) or '(none given)'}; "
                f"known: {', '.join(ALL_EVENT_TYPES)}.")
        return names

    def validate(self, attrs: dict) -> dict:
        if "after" in attrs and "since" in attrs:
            raise serializers.ValidationError({"since": ["Give `after` or `since`, not both."]})
        return attrs


class EventSerializer(serializers.Serializer):
    """One event (eventlog.payloads.event_payload): message events carry the message's
    fields, recipient events (recipient.*) the consent change's."""

    id = serializers.CharField(help_text="Stable: the key to deduplicate by (callbacks post the same id).")
    type = serializers.ChoiceField(choices=ALL_EVENT_TYPES)
    occurred_at = serializers.DateTimeField()
    message_id = serializers.IntegerField(allow_null=True)
    recipient = serializers.CharField(allow_null=True)
    idempotency_key = serializers.CharField(allow_null=True, required=False,
                                            help_text="Your key of the message, if you gave one.")
    campaign_id = serializers.IntegerField(allow_null=True, required=False)
    stream = serializers.CharField(allow_null=True, required=False)
    provider = serializers.CharField(allow_null=True, required=False)
    error = serializers.CharField(allow_null=True, required=False)
    bounce_type = serializers.CharField(allow_null=True, required=False)
    test = serializers.BooleanField(allow_null=True, required=False,
                                    help_text="A test key's message (the sandbox settled it).")
    topic = serializers.CharField(allow_null=True, required=False, help_text="recipient.*: the topic's name.")
    subscribed = serializers.BooleanField(allow_null=True, required=False)
    source = serializers.CharField(allow_null=True, required=False)


class EventPageSerializer(serializers.Serializer):
    events = EventSerializer(many=True)
    next = serializers.CharField(help_text="Always present: the `after` of the next call, even after "
                                           "an empty page.")


class EventListApi(APIView):
    # Reading what happened to the service's messages is what `GET /messages/{id}` (send) and
    # the statistics (analytics) already allow; no scope of its own (decision 115).
    required_scope = ("send", "analytics")
    throttle_scope = "events"

    @extend_schema(
        summary="The service's events (what callbacks post), after a cursor",
        description="Events of your own service only, in the order they were committed, "
                    "never skipping one that commits late. Start with `since` (or nothing: the "
                    "oldest kept, `NOTIFIER_EVENT_LOG_DAYS`), then pass each answer's `next` as "
                    "`after`; poll with it even when `events` is empty. Deduplicate by `id`. "
                    "Events older than your `metadata_days` of their stream are not read.",
        parameters=[EventsQuerySerializer],
        responses={200: EventPageSerializer},
        examples=[OpenApiExample("A page", response_only=True, value={
            "events": [{"id": "812", "type": "message.sent", "occurred_at": "2026-12-04T10:00:01Z",
                        "message_id": 42, "recipient": "ada@example.com", "idempotency_key": "otp-7",
                        "campaign_id": None, "stream": "transactional", "provider": "smtp",
                        "error": None, "bounce_type": None, "test": False}],
            "next": "MTIzNDU2LjgxMg"})],
    )
    def get(self, request: Request) -> Response:
        query = EventsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        service_id = request.user.pk  # the caller's own service, whatever its scopes
        cursor = params.get("after") or (since_cursor(service_id, params["since"]) if "since" in params
                                         else START)
        events, following = events_page(service_id, cursor, params["limit"], params.get("types"),
                                        visible_since=metadata_visible_since(request.user.service))
        return Response({"events": [event_payload(event) for event in events], "next": following.encode()})

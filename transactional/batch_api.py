"""POST /api/v1/messages/batch: up to NOTIFIER_BATCH_MAX_MESSAGES messages in one request.

Each item is validated on its own, exactly as POST /api/v1/messages validates its body (one
serializer, transactional/inputs.py); the answer has one result per item, in order: `{id,
status}` for an accepted one, the error shape naming `messages[i].<field>` for a refused one.
202: every item accepted; 207: some accepted, some refused; 400 (409 when every refusal is an
idempotency conflict): none accepted, and nothing was written. Over the count or the byte limit
is a 413 naming `messages` (decision 105).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from clients.caller import Caller
from clients.idempotency import idempotent
from clients.key_types import caller_key_type
from clients.send_guards import MaySend
from clients.team import team_list_outsiders
from core.api.errors import error_body, error_fields
from core.api.schema import ErrorDetailSerializer
from core.priorities import Priority
from delivery.models import EmailMessage
from transactional.batch import BatchAccepted, BatchItem, BatchOutcome, messages_create_batch
from transactional.inputs import MessageInputSerializer, TemplateLookup, TopicLookup

FIELD = "messages"


class BatchTooLarge(exceptions.ValidationError):
    """A 413 in the error shape that names `messages` (a ValidationError, so `fields` is set)."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


class BatchKeysConflict(exceptions.ValidationError):
    """Every refused item reused an idempotency key for another message: a 409, as one send's."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


def batch_messages(data: Any) -> list[Any]:
    """The body's `messages` list, or the 400/413 about the body as a whole."""
    if not isinstance(data, dict):
        raise exceptions.ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [
            'Expected an object: {"messages": [...]}.']})
    unknown = sorted(set(data) - {FIELD})
    if unknown:
        raise exceptions.ValidationError({name: ["Unknown field."] for name in unknown})
    messages = data.get(FIELD)
    if not isinstance(messages, list) or not messages:
        raise exceptions.ValidationError({FIELD: ["A list of 1 or more messages is required."]})
    limit = settings.NOTIFIER_BATCH_MAX_MESSAGES
    if len(messages) > limit:
        raise BatchTooLarge({FIELD: [f"{len(messages)} messages; a batch holds at most {limit}."]})
    return messages


def _item_error(index: int, detail: Any, code: str = "invalid") -> dict:
    fields = error_fields({FIELD: {index: detail}})
    return error_body(code, f"Invalid input in: {', '.join(sorted(fields))}.", fields)


def _validated(messages: list[Any], caller: Caller) -> tuple[dict[int, dict], dict[int, dict]]:
    """(valid items' data, refused items' errors), each by item index. One serializer instance
    for every item, as DRF's ListSerializer does, and one template lookup per reference."""
    item = MessageInputSerializer(context={"client_id": caller.pk, "templates": TemplateLookup(caller.pk),
                                           "topics": TopicLookup(caller.pk)})
    valid: dict[int, dict] = {}
    refused: dict[int, dict] = {}
    for index, raw in enumerate(messages):
        try:
            valid[index] = item.run_validation(raw)
        except exceptions.ValidationError as exc:
            refused[index] = _item_error(index, exc.detail)
    outsiders = set(team_list_outsiders(caller, [data["to"] for data in valid.values()]))
    for index in [i for i, data in valid.items() if data["to"].lower() in outsiders]:
        del valid[index]
        refused[index] = _item_error(index, {"to": [
            "A team key sends only to the service's team list (/api/v1/team-members)."]})
    return valid, refused


def _batch_item(data: dict) -> BatchItem:
    return BatchItem(recipient=data["to"], template_version=data["template"], context=data["context"],
                     priority=Priority.from_label(data["priority"]),
                     idempotency_key=data.get("idempotency_key"),
                     scheduled_for=data["schedule"].due_at, cancel_key=data["schedule"].cancel_key,
                     stream=data["stream"], topic=data["topic"], metadata=data.get("metadata"))


def _accepted_body(outcome: BatchAccepted) -> dict:
    body: dict[str, Any] = {"id": outcome.id, "status": outcome.status}
    if outcome.scheduled_for:
        body["scheduled_for"] = outcome.scheduled_for.isoformat()
    if outcome.replayed:
        body["replayed"] = True
    return body


def _result(index: int, outcome: BatchOutcome) -> dict:
    if isinstance(outcome, BatchAccepted):
        return _accepted_body(outcome)
    return _item_error(index, {"idempotency_key": [
        "This idempotency_key was used with a different request."]}, code="conflict")


class BatchResultSerializer(serializers.Serializer):
    """One item's result: `id` and `status` when accepted, `error` when refused."""

    id = serializers.IntegerField(required=False)
    status = serializers.ChoiceField(choices=EmailMessage.Status.choices, required=False)
    scheduled_for = serializers.DateTimeField(required=False, help_text="Set for future sends.")
    replayed = serializers.BooleanField(
        required=False, help_text="true: the item's idempotency_key named this earlier message.")
    error = ErrorDetailSerializer(required=False, help_text="Why this item was refused.")


_EXAMPLE_ITEMS = [
    {"to": "ada@example.com", "template": "welcome", "priority": "critical",
     "context": {"name": "Ada", "code": "123456"}, "idempotency_key": "receipt-1001"},
    {"to": "grace@example.com", "template": "welcome", "context": {"name": "Grace", "code": "654321"}},
]


class MessageBatchCreateApi(APIView):
    """POST /api/v1/messages/batch: counts as one request against the `send` rate budget."""

    required_scope = "send"
    throttle_scope = "send"
    permission_classes = [*api_settings.DEFAULT_PERMISSION_CLASSES, MaySend]

    class InputSerializer(serializers.Serializer):
        messages = MessageInputSerializer(
            many=True, help_text="1 to NOTIFIER_BATCH_MAX_MESSAGES (1,000) messages, each as "
                                 "POST /api/v1/messages takes it.")

    class OutputSerializer(serializers.Serializer):
        accepted = serializers.IntegerField(help_text="Items answered with an id.")
        rejected = serializers.IntegerField(help_text="Items answered with an error.")
        results = BatchResultSerializer(many=True, help_text="One per item, in the items' order.")

    @extend_schema(
        summary="Send up to 1,000 transactional emails in one request",
        description="Each item is what POST /api/v1/messages takes, validated on its own; the "
                    "answer lists one result per item in order. 202: all accepted; 207: some "
                    "accepted, the others' results hold the error shape naming "
                    "`messages[i].<field>`; 400: none accepted (nothing written); 413: more than "
                    "1,000 items or a body over NOTIFIER_BATCH_MAX_BODY_BYTES. An item's "
                    "`idempotency_key` replays its first message (`replayed: true`); the key with "
                    "another message refuses that item (code `conflict`).",
        request=InputSerializer,
        responses={202: OutputSerializer, 207: OutputSerializer},
        examples=[
            OpenApiExample("Two messages", request_only=True, value={"messages": _EXAMPLE_ITEMS}),
            OpenApiExample("One valid, one not", request_only=True, value={"messages": [
                _EXAMPLE_ITEMS[1], {"to": "not-an-address", "template": "welcome",
                                    "context": {"name": "Ada", "code": "1"}}]}),
            OpenApiExample("All accepted", response_only=True, status_codes=["202"], value={
                "accepted": 2, "rejected": 0,
                "results": [{"id": 1, "status": "QUEUED"}, {"id": 2, "status": "QUEUED"}]}),
            OpenApiExample("Some refused", response_only=True, status_codes=["207"], value={
                "accepted": 1, "rejected": 1, "results": [
                    {"id": 3, "status": "QUEUED"},
                    {"error": {"code": "invalid", "message": "Invalid input in: messages[1].to.",
                               "fields": {"messages[1].to": ["Enter a valid email address."]}}}]}),
        ],
    )
    @idempotent
    def post(self, request: Request) -> Response:
        messages = batch_messages(request.data)
        valid, refused = _validated(messages, request.user)
        indexes = sorted(valid)
        outcomes = messages_create_batch(client=request.user.service,
                                         items=[_batch_item(valid[i]) for i in indexes],
                                         key_type=caller_key_type(request))
        results: dict[int, dict] = {**refused}
        for index, outcome in zip(indexes, outcomes, strict=True):
            results[index] = _result(index, outcome)
        ordered = [results[index] for index in range(len(messages))]
        accepted = sum(1 for result in ordered if "id" in result)
        if not accepted:
            raise self._none_accepted(ordered)
        body = {"accepted": accepted, "rejected": len(ordered) - accepted, "results": ordered}
        code = status.HTTP_202_ACCEPTED if accepted == len(ordered) else status.HTTP_207_MULTI_STATUS
        return Response(body, status=code)

    @staticmethod
    def _none_accepted(results: list[dict]) -> exceptions.ValidationError:
        """Every item's fields in one error (nothing was written): 409 if all were conflicts."""
        fields: dict[str, list[str]] = {}
        for result in results:
            fields.update(result["error"]["fields"])
        conflicts = all(result["error"]["code"] == "conflict" for result in results)
        return (BatchKeysConflict if conflicts else exceptions.ValidationError)(fields)

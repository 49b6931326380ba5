"""POST and GET /api/v1/messages, GET /api/v1/messages/{id} and GET /api/v1/messages/ambiguous."""

from __future__ import annotations

from django.db.models import prefetch_related_objects
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from audience.topic_fields import TopicSummarySerializer
from clients.idempotency import idempotent
from clients.key_types import KeyType, caller_key_type
from clients.retention import metadata_visible_since
from clients.send_guards import MaySend
from clients.team import team_list_check
from clients.tenancy import owned, owned_or_404
from core.api.metadata import MetadataField
from core.priorities import Priority
from delivery.models import EmailMessage
from delivery.selectors import ambiguous_summary, messages_visible
from transactional.inputs import MessageInputSerializer
from transactional.log_api import LOG_DESCRIPTION, LOG_PARAMETERS, log_filters, log_query, next_page_url
from transactional.message_log import messages_log, within_retention
from transactional.services import message_create


class MessageSerializer(serializers.ModelSerializer):
    """A message as GET /api/v1/messages/{id} and each row of GET /api/v1/messages show it."""

    priority = serializers.SerializerMethodField()
    template = serializers.CharField(source="template_version.template.name")
    template_version = serializers.IntegerField(source="template_version.version")
    campaign = serializers.IntegerField(source="campaign_id", allow_null=True,
                                        help_text="The campaign that sent it; null: a one-off send.")
    topic = TopicSummarySerializer(allow_null=True, read_only=True,
                                   help_text="The broadcast message's topic; null: none.")
    metadata = MetadataField(read_only=True, help_text="Your references, as sent; null: none.")
    recipient = serializers.SerializerMethodField(
        help_text="null once the message's personal data was removed (personal_data_removed_at).")
    personal_data_removed_at = serializers.DateTimeField(
        read_only=True, allow_null=True,
        help_text="When the address and context were removed after your retention; null: kept.")

    class Meta:
        model = EmailMessage
        fields = [
            "id", "recipient", "status", "priority", "template", "template_version", "stream", "topic",
            "campaign",
            "provider", "provider_message_id", "attempts", "error", "created_at",
            "scheduled_for", "sent_at", "delivered_at", "opened_at", "clicked_at", "bounced_at",
            "metadata", "personal_data_removed_at",
        ]

    def get_priority(self, message: EmailMessage) -> str:
        return Priority(message.priority).label

    @extend_schema_field(OpenApiTypes.EMAIL)
    def get_recipient(self, message: EmailMessage) -> str | None:
        return None if message.personal_data_removed_at else message.recipient


class MessageCreateApi(APIView):
    required_scope = "send"
    throttle_scope = "send"
    permission_classes = [*api_settings.DEFAULT_PERMISSION_CLASSES, MaySend]

    class InputSerializer(MessageInputSerializer):
        """One message (transactional/inputs.py), as each item of a batch is too."""

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        status = serializers.ChoiceField(choices=EmailMessage.Status.choices)
        scheduled_for = serializers.DateTimeField(required=False, help_text="Set for future sends.")

    @extend_schema(
        summary="Send one email (transactional unless it says broadcast)",
        description="Queues one message built from a template. `template` is a template id or "
                    "name; `context` must hold every variable the template uses. The body field "
                    "`idempotency_key` and the `Idempotency-Key` header both make retries safe; "
                    "either one reused with a different request is a 409. `stream`: "
                    "`transactional` (the default: an OTP, a receipt, a password reset) is stopped "
                    "only by a bounce, a complaint or an all-streams suppression, never by an "
                    "unsubscribe; `broadcast` (with an optional `topic`, by id or name) is also "
                    "answered `SUPPRESSED` for a recipient who left your broadcast stream or the "
                    "topic. A `topic` without `\"stream\": \"broadcast\"`, or another service's, "
                    "an archived or an unknown one, is a 400 naming `topic`.",
        request=InputSerializer,
        responses={202: OutputSerializer},
        # The tour's requests (README): `welcome` is the template `make run` gives its demo client.
        examples=[
            OpenApiExample("Send now", request_only=True, value={
                "to": "you@example.com", "template": "welcome", "priority": "critical",
                "context": {"name": "Ada", "code": "123456"}}),
            OpenApiExample("In 30 seconds, cancellable", request_only=True, value={
                "to": "you@example.com", "template": "welcome", "context": {"name": "Ada", "code": "123456"},
                "schedule": {"type": "delayed", "delay_seconds": 30, "cancel_key": "cart-1"}}),
            OpenApiExample("A newsletter (broadcast stream)", request_only=True, value={
                "to": "you@example.com", "template": "welcome", "stream": "broadcast",
                "context": {"name": "Ada", "code": "123456"}}),
            OpenApiExample("Queued", response_only=True, status_codes=["202"],
                           value={"id": 1, "status": "QUEUED"}),
            OpenApiExample("Scheduled", response_only=True, status_codes=["202"],
                           value={"id": 2, "status": "SCHEDULED",
                                  "scheduled_for": "2026-12-01T09:00:30+00:00"}),
        ],
    )
    @idempotent
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data, context={"client_id": request.user.pk})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        team_list_check(request.user, [data["to"]], field="to")
        created = message_create(
            client=request.user.service,
            recipient=data["to"],
            template_version=data["template"],
            context=data["context"],
            priority=Priority.from_label(data["priority"]),
            idempotency_key=data.get("idempotency_key"),
            scheduled_for=data["schedule"].due_at,
            cancel_key=data["schedule"].cancel_key,
            key_type=caller_key_type(request),
            stream=data["stream"],
            topic=data["topic"],
            metadata=data.get("metadata"),
        )
        message = created.message
        headers = {"Idempotent-Replayed": "true"} if created.replayed else {}
        body = {"id": message.id, "status": message.status}
        if message.scheduled_for:
            body["scheduled_for"] = message.scheduled_for.isoformat()
        return Response(body, status=status.HTTP_202_ACCEPTED, headers=headers)

    class LogPageSerializer(serializers.Serializer):
        next = serializers.URLField(allow_null=True, help_text="The next page; null: this is the last.")
        results = MessageSerializer(many=True)

    @extend_schema(summary="Search your messages (the message log), newest first",
                   operation_id="messages_list",
                   description=LOG_DESCRIPTION, parameters=LOG_PARAMETERS,
                   responses={200: LogPageSerializer})
    def get(self, request: Request) -> Response:
        data, metadata = log_query(request)
        limit = data["limit"]
        rows = messages_log(service_id=request.user.pk, key_type=caller_key_type(request),
                            filters=log_filters(data, metadata), after=data.get("cursor"),
                            limit=limit + 1, asked_key_type=data.get("key_type"),
                            visible_since=metadata_visible_since(request.user.service))
        prefetch_related_objects(rows, "template_version__template", "topic")
        return Response({"next": next_page_url(request, rows, limit),
                         "results": MessageSerializer(rows[:limit], many=True).data})


class MessageDetailApi(APIView):
    required_scope = "send"
    throttle_scope = "send"

    OutputSerializer = MessageSerializer

    class InputSerializer(serializers.Serializer):
        key_type = serializers.ChoiceField(
            choices=KeyType.values, required=False,
            help_text="`test`: a live or team key reads a test key's message (a test key reads only those).")

    @extend_schema(summary="A message's status, provider and timestamps",
                   parameters=[InputSerializer], responses={200: OutputSerializer})
    def get(self, request: Request, message_id: int) -> Response:
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        rows = EmailMessage.objects.select_related("template_version__template", "topic")
        rows = within_retention(rows, metadata_visible_since(request.user.service))
        queryset = messages_visible(rows, key_type=caller_key_type(request),
                                    asked=params.validated_data.get("key_type"))
        message = owned_or_404(queryset, request.user, message="No such message.", pk=message_id)
        return Response(self.OutputSerializer(message).data)


class AmbiguousGroupSerializer(serializers.Serializer):
    reason = serializers.CharField(help_text="why it is held: worker_lost | no_answer | provider_raised")
    provider = serializers.CharField(help_text="the one provider that may have these messages")
    count = serializers.IntegerField()
    oldest_seconds = serializers.IntegerField()
    next_step = serializers.CharField(help_text="what will settle them, in words")


class AmbiguousAgeSerializer(serializers.Serializer):
    age = serializers.CharField()
    count = serializers.IntegerField()


class AmbiguousRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    recipient = serializers.EmailField()
    provider = serializers.CharField()
    reason = serializers.CharField()
    age_seconds = serializers.IntegerField()


class AmbiguousMessagesApi(APIView):
    """GET /api/v1/messages/ambiguous: the caller's sends whose outcome is not known yet."""

    required_scope = "send"
    throttle_scope = "send"

    class OutputSerializer(serializers.Serializer):
        total = serializers.IntegerField()
        by_reason = AmbiguousGroupSerializer(many=True)
        by_age = AmbiguousAgeSerializer(many=True)
        oldest = AmbiguousRowSerializer(many=True, help_text="the oldest 50")

    @extend_schema(
        summary="Sends whose outcome is not known yet (AMBIGUOUS), by reason and age",
        description="A send is AMBIGUOUS when its request may have reached the ESP and no answer "
                    "came back. Each is settled from the ESP's evidence: an event about it marks "
                    "it sent; no event while the ESP's events cover later sends re-sends it "
                    "through the same ESP. `next_step` says which applies.",
        responses={200: OutputSerializer},
    )
    def get(self, request: Request) -> Response:
        mine = messages_visible(owned(EmailMessage.objects.all(), request.user),
                                key_type=caller_key_type(request))
        summary = ambiguous_summary(mine, now=timezone.now())
        return Response(self.OutputSerializer(summary).data)

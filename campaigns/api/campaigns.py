"""POST /notifications/email, GET /campaigns[/{id}], POST /campaigns/{id}/pause|resume|cancel|test."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from audience.api import TooLarge
from audience.models import Stream
from audience.topic_fields import TopicSummarySerializer
from audience.validation import AudienceTooLargeError
from campaigns.models import Campaign
from campaigns.selectors import campaign_counters
from campaigns.services import lifecycle
from campaigns.services.launch import campaign_launch_detailed
from campaigns.validation import CampaignDefinitionSerializer
from clients.key_types import caller_key_type, on_callers_side
from clients.send_guards import MaySend
from clients.team import team_key_audience_check, team_list_check
from clients.tenancy import owned, owned_or_404
from core.api.errors import Conflict
from core.api.schema import error_response
from core.priorities import Priority
from transactional.services import message_create

PAGE_SIZE = 100
MAX_TEST_ADDRESSES = 10


class CampaignOutputSerializer(serializers.ModelSerializer):
    campaign_id = serializers.IntegerField(source="id")
    label = serializers.CharField(source="external_id")
    priority = serializers.SerializerMethodField()
    template_id = serializers.IntegerField(source="template_version.template_id")
    topic = TopicSummarySerializer(allow_null=True, read_only=True,
                                   help_text="What the campaign is about; null: the whole broadcast stream.")
    personal_data_removed_at = serializers.DateTimeField(
        read_only=True, allow_null=True,
        help_text="When an ended inline campaign's recipient addresses were removed after the "
                  "service's broadcast personal-data retention; null: not removed.")

    class Meta:
        model = Campaign
        fields = ["campaign_id", "label", "name", "status", "priority", "template_id", "topic", "metadata",
                  "created_at", "started_at", "completed_at", "personal_data_removed_at"]

    def get_priority(self, campaign: Campaign) -> str:
        return Priority(campaign.priority).label


class CampaignCountersSerializer(serializers.Serializer):
    total = serializers.IntegerField(help_text="The whole audience.")
    done = serializers.IntegerField(help_text="Messages in a final state.")
    scheduled = serializers.IntegerField()
    queued = serializers.IntegerField()
    sending = serializers.IntegerField()
    sent = serializers.IntegerField()
    delivered = serializers.IntegerField()
    opened = serializers.IntegerField()
    clicked = serializers.IntegerField()
    bounced = serializers.IntegerField()
    complained = serializers.IntegerField()
    failed = serializers.IntegerField()
    ambiguous = serializers.IntegerField()
    suppressed = serializers.IntegerField(help_text="Including contacts left out at fan-out.")
    cancelled = serializers.IntegerField()


class CampaignDetailSerializer(CampaignOutputSerializer):
    counters = CampaignCountersSerializer()

    class Meta(CampaignOutputSerializer.Meta):
        fields = [*CampaignOutputSerializer.Meta.fields, "counters"]


class CampaignStatusSerializer(serializers.Serializer):
    campaign_id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=Campaign.Status.choices)


class RecurringCreatedSerializer(serializers.Serializer):
    campaign_id = serializers.IntegerField(allow_null=True, help_text="null: each run makes one.")
    schedule_id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["SCHEDULED"])
    type = serializers.CharField()
    cron = serializers.CharField()
    timezone = serializers.CharField()
    next_run = serializers.DateTimeField(allow_null=True)


# Each works on `make run` as it starts: the demo client's `welcome` template, inline recipients.
_INLINE = {"type": "inline", "contacts": [
    {"email": "ada@example.com", "name": "Ada", "data": {"code": "123456"}},
    {"email": "grace@example.com", "name": "Grace", "timezone": "Europe/Paris", "data": {"code": "654321"}}]}
SEND_EXAMPLES = [
    OpenApiExample("Send now (202)", request_only=True,
                   value={"name": "Welcome wave", "template_id": "welcome", "recipients": _INLINE}),
    OpenApiExample("Every Friday at 17:00 (201, a schedule)", request_only=True, value={
        "name": "Friday news", "template_id": "welcome", "recipients": _INLINE,
        "schedule": {"type": "recurring", "cron": "0 17 * * 5", "timezone": "Europe/Berlin"}}),
    OpenApiExample("Queued", response_only=True, status_codes=["202"],
                   value={"campaign_id": 1, "status": "QUEUED"}),
]
TOO_MANY_INLINE = error_response(413, "More than 10,000 inline recipients.",
                                 "10001 inline recipients: at most 10000 per request. Upload them with "
                                 "POST /api/v1/contacts/bulk (with a list) and send to the list.")


def _own_campaign(request: Request, campaign_id: int) -> Campaign:
    return owned_or_404(Campaign.objects.select_related("template_version", "topic"), request.user,
                        message="No such campaign.", pk=campaign_id)


class CampaignSendApi(APIView):
    """Send a template to a segment, list or inline audience (fan-out runs as a task)."""
    required_scope = "campaigns"
    throttle_scope = "campaigns"
    permission_classes = [*api_settings.DEFAULT_PERMISSION_CLASSES, MaySend]

    @extend_schema(
        summary="Send a template to a segment, list or inline audience",
        description="Answers at once: the fan-out runs as a task (`GET /api/v1/campaigns/{id}` "
                    "follows it). A `recurring` schedule creates a schedule instead (201).",
        request=CampaignDefinitionSerializer,
        responses={202: CampaignStatusSerializer,
                   201: OpenApiResponse(RecurringCreatedSerializer, description="A recurring schedule."),
                   413: TOO_MANY_INLINE},
        examples=SEND_EXAMPLES,
    )
    def post(self, request: Request) -> Response:
        if not isinstance(request.data, dict):
            raise serializers.ValidationError({"non_field_errors": ["Expected a JSON object."]})
        team_key_audience_check(request.user, request.data.get("recipients"))
        try:
            launched = campaign_launch_detailed(definition=request.data, client_id=request.user.pk,
                                                key_type=caller_key_type(request))
        except AudienceTooLargeError as exc:
            raise TooLarge(str(exc)) from exc
        if launched.schedule is not None:
            schedule = launched.schedule
            return Response({"campaign_id": None, "schedule_id": schedule.pk, "status": "SCHEDULED",
                             "type": schedule.type, "cron": schedule.cron, "timezone": schedule.timezone,
                             "next_run": schedule.next_run}, status=status.HTTP_201_CREATED)
        campaign = launched.campaign
        headers = {"Idempotent-Replayed": "true"} if launched.replayed else {}
        body = {"campaign_id": campaign.pk, "status": campaign.status}
        return Response(body, status=status.HTTP_202_ACCEPTED, headers=headers)


class CampaignListApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"

    class QuerySerializer(serializers.Serializer):
        status = serializers.CharField(required=False, max_length=20, help_text="e.g. SENDING")
        before = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1,
                                          help_text="`next_before` of the previous page.")

    class PageSerializer(serializers.Serializer):
        results = CampaignOutputSerializer(many=True, help_text=f"{PAGE_SIZE} per page, newest first.")
        next_before = serializers.IntegerField(allow_null=True, help_text="null on the last page.")

    @extend_schema(operation_id="campaigns_list", parameters=[QuerySerializer],
                   responses={200: PageSerializer})
    def get(self, request: Request) -> Response:
        """Newest first, keyset pages: ?before=<smallest id of the previous page>&status=..."""
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        queryset = on_callers_side(owned(Campaign.objects.select_related("template_version", "topic"),
                                         request.user), caller_key_type(request))
        if params.get("status"):
            queryset = queryset.filter(status=params["status"].upper())
        if params.get("before"):
            queryset = queryset.filter(pk__lt=params["before"])
        page = list(queryset.order_by("-id")[:PAGE_SIZE])
        next_before = page[-1].pk if len(page) == PAGE_SIZE else None
        return Response({"results": CampaignOutputSerializer(page, many=True).data,
                         "next_before": next_before})


class CampaignDetailApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"

    @extend_schema(responses={200: CampaignDetailSerializer})
    def get(self, request: Request, campaign_id: int) -> Response:
        """A campaign with its live counters."""
        campaign = _own_campaign(request, campaign_id)
        body = CampaignOutputSerializer(campaign).data
        body["counters"] = campaign_counters(campaign=campaign)
        return Response(body)


class CampaignActionApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"
    action_name = ""
    actions = {
        "pause": lifecycle.campaign_pause,
        "resume": lifecycle.campaign_resume,
        "cancel": lifecycle.campaign_cancel,
    }

    @extend_schema(request=None, responses={200: CampaignStatusSerializer, 409: error_response(
        409, "The campaign's status does not allow this now.",
        "Cannot resume a campaign that is COMPLETED.")})
    def post(self, request: Request, campaign_id: int) -> Response:
        """Pause, resume or cancel a campaign (409 if the change is illegal now)."""
        _own_campaign(request, campaign_id)
        try:
            campaign = self.actions[self.action_name](campaign_id=campaign_id)
        except lifecycle.IllegalTransitionError as exc:
            raise Conflict(str(exc)) from exc
        return Response({"campaign_id": campaign.pk, "status": campaign.status})


class CampaignTestApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"

    class InputSerializer(serializers.Serializer):
        emails = serializers.ListField(
            child=serializers.EmailField(max_length=254), min_length=1, max_length=MAX_TEST_ADDRESSES
        )
        data = serializers.DictField(required=False, default=dict,
                                     help_text="Merge data for the template (beside email and name).")

    class OutputSerializer(serializers.Serializer):
        message_ids = serializers.ListField(child=serializers.IntegerField())

    @extend_schema(request=InputSerializer, responses={202: OutputSerializer}, examples=[
        OpenApiExample("Try it on yourself", request_only=True,
                       value={"emails": ["you@example.com"], "data": {"name": "Ada", "code": "123456"}})])
    def post(self, request: Request, campaign_id: int) -> Response:
        """Send the campaign's template to the given addresses only (not counted in the campaign),
        as the campaign's mail: broadcast, of its topic (an address that left the topic or the
        broadcast stream gets no test either)."""
        campaign = _own_campaign(request, campaign_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        team_list_check(request.user, data["emails"], field="emails")
        ids = []
        for email in data["emails"]:
            context = {"email": email, "name": "", "timezone": "", "locale": "", **data["data"]}
            created = message_create(
                client=request.user.service, recipient=email.lower(),
                template_version=campaign.template_version, context=context, priority=Priority.HIGH,
                key_type=caller_key_type(request), stream=Stream.BROADCAST, topic=campaign.topic,
            )
            ids.append(created.message.pk)
        return Response({"message_ids": ids}, status=status.HTTP_202_ACCEPTED)

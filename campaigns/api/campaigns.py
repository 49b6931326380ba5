"""POST /notifications/email, GET /campaigns[/{id}], POST /campaigns/{id}/pause|resume|cancel|test."""

from __future__ import annotations

from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from audience.api import TooLarge
from audience.validation import AudienceTooLargeError
from campaigns.models import Campaign
from campaigns.selectors import campaign_counters
from campaigns.services import lifecycle
from campaigns.services.launch import campaign_launch_detailed
from clients.send_guards import MaySend
from clients.tenancy import owned, owned_or_404
from core.priorities import Priority
from transactional.services import message_create

PAGE_SIZE = 100
MAX_TEST_ADDRESSES = 10


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


class CampaignOutputSerializer(serializers.ModelSerializer):
    campaign_id = serializers.IntegerField(source="id")
    label = serializers.CharField(source="external_id")
    priority = serializers.SerializerMethodField()
    template_id = serializers.IntegerField(source="template_version.template_id")

    class Meta:
        model = Campaign
        fields = ["campaign_id", "label", "name", "status", "priority", "template_id", "metadata",
                  "created_at", "started_at", "completed_at"]

    def get_priority(self, campaign: Campaign) -> str:
        return Priority(campaign.priority).label


def _own_campaign(request: Request, campaign_id: int) -> Campaign:
    return owned_or_404(Campaign.objects.select_related("template_version"), request.user,
                        message="No such campaign.", pk=campaign_id)


class CampaignSendApi(APIView):
    """Send a template to a segment, list or inline audience (fan-out runs as a task)."""
    required_scope = "campaigns"
    throttle_scope = "campaigns"
    permission_classes = [*api_settings.DEFAULT_PERMISSION_CLASSES, MaySend]

    def post(self, request: Request) -> Response:
        if not isinstance(request.data, dict):
            raise serializers.ValidationError({"non_field_errors": ["Expected a JSON object."]})
        try:
            launched = campaign_launch_detailed(definition=request.data, client_id=request.user.pk)
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
    def get(self, request: Request) -> Response:
        """Newest first, keyset pages: ?before=<smallest id of the previous page>&status=..."""
        queryset = owned(Campaign.objects.select_related("template_version"), request.user)
        if request.query_params.get("status"):
            queryset = queryset.filter(status=request.query_params["status"].upper())
        before = request.query_params.get("before")
        if before and before.isdigit():
            queryset = queryset.filter(pk__lt=int(before))
        page = list(queryset.order_by("-id")[:PAGE_SIZE])
        next_before = page[-1].pk if len(page) == PAGE_SIZE else None
        return Response({"results": CampaignOutputSerializer(page, many=True).data,
                         "next_before": next_before})


class CampaignDetailApi(APIView):
    required_scope = "campaigns"
    throttle_scope = "campaigns"
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
        data = serializers.DictField(required=False, default=dict)

    def post(self, request: Request, campaign_id: int) -> Response:
        """Send the campaign's template to the given addresses only (not counted in the campaign)."""
        campaign = _own_campaign(request, campaign_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        ids = []
        for email in data["emails"]:
            context = {"email": email, "name": "", "timezone": "", "locale": "", **data["data"]}
            created = message_create(
                client=request.user, recipient=email.lower(), template_version=campaign.template_version,
                context=context, priority=Priority.HIGH,
            )
            ids.append(created.message.pk)
        return Response({"message_ids": ids}, status=status.HTTP_202_ACCEPTED)

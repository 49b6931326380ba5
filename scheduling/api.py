"""The schedules API: list (with the queue snapshot), create recurring, show, pause, resume,
cancel; and cancelling delayed messages by their cancel_key."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clients.key_types import caller_key_type, on_callers_side
from clients.team import team_key_audience_check
from clients.tenancy import owned, owned_or_404
from core.priorities import Priority
from scheduling import selectors, timing
from scheduling.models import Schedule
from scheduling.services import due
from scheduling.services.cancel import messages_cancel_by_key
from scheduling.services.recurring import (
    schedule_cancel,
    schedule_create_recurring,
    schedule_pause,
    schedule_resume,
)


class ScheduleOutputSerializer(serializers.ModelSerializer):
    pending_count = serializers.SerializerMethodField()

    class Meta:
        model = Schedule
        fields = ["id", "name", "campaign_id", "type", "cron", "timezone", "scheduled_at", "next_run",
                  "last_run", "status", "pending_count"]

    def get_pending_count(self, schedule: Schedule) -> int:
        return self.context.get("pending", {}).get(schedule.campaign_id, 0)


class ScheduledMessageSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    to = serializers.EmailField()
    scheduled_for = serializers.DateTimeField()
    cancel_key = serializers.CharField(allow_blank=True)
    priority = serializers.ChoiceField(choices=[p.label for p in Priority])


class ScheduledMessagesSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="All of this client's one-off sends still waiting.")
    messages = ScheduledMessageSerializer(many=True, help_text="The soonest 100.")


class QueueBacklogSerializer(serializers.Serializer):
    pending = serializers.IntegerField(help_text="QUEUED: waiting for a worker.")
    processing = serializers.IntegerField(help_text="SENDING: claimed by a worker.")
    oldest_age_seconds = serializers.FloatField(allow_null=True,
                                                help_text="The longest wait of a pending message.")


class QueueSnapshotSerializer(serializers.Serializer):
    critical = QueueBacklogSerializer()
    high = QueueBacklogSerializer()
    normal = QueueBacklogSerializer()
    low = QueueBacklogSerializer()


class DueSetSerializer(serializers.Serializer):
    due_now = serializers.IntegerField()
    future = serializers.IntegerField()
    processing = serializers.IntegerField()
    oldest_due_age_seconds = serializers.FloatField(allow_null=True)


class ScheduleListOutputSerializer(serializers.Serializer):
    schedules = ScheduleOutputSerializer(many=True, help_text="The newest 500 schedules.")
    scheduled_messages = ScheduledMessagesSerializer()
    queue_snapshot = QueueSnapshotSerializer()
    due_set = DueSetSerializer()


RECURRING_EXAMPLE = {
    "name": "monday-digest", "type": "recurring", "cron": "0 9 * * 1", "timezone": "Europe/Berlin",
    "definition": {"template_id": "welcome", "recipients": {"type": "inline", "contacts": [
        {"email": "you@example.com", "name": "Ada", "data": {"code": "123456"}}]}},
}


def _schedule_body(schedules: list[Schedule]) -> list[dict]:
    pending = selectors.pending_counts(campaign_ids=[s.campaign_id for s in schedules if s.campaign_id])
    return ScheduleOutputSerializer(schedules, many=True, context={"pending": pending}).data


def _due_set_body(now_epoch: float) -> dict:
    stats = due.due_stats(now=now_epoch)
    oldest = round(now_epoch - stats.oldest_due_epoch, 3) if stats.oldest_due_epoch else None
    return {"due_now": stats.due_now, "future": stats.future, "processing": stats.processing,
            "oldest_due_age_seconds": oldest if oldest and oldest > 0 else 0 if stats.due_now else None}


class ScheduleListApi(APIView):
    required_scope = "schedules"
    throttle_scope = "schedules"

    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        type = serializers.ChoiceField(choices=["recurring"])
        cron = serializers.CharField(max_length=120, help_text="Five fields (`0 9 * * 1`): must fire.")
        timezone = serializers.CharField(max_length=64, default="UTC", help_text="The cron's IANA zone.")
        definition = serializers.DictField(
            help_text="What each run launches: a body of POST /api/v1/notifications/email "
                      "(validated now: it must be able to launch)."
        )

    @extend_schema(operation_id="schedules_list", responses={200: ScheduleListOutputSerializer})
    def get(self, request: Request) -> Response:
        """Schedules and a snapshot of the queues and the due set."""
        now = timezone.now()
        # A test key's schedules are its own data, as its messages (issue 27).
        mine = on_callers_side(owned(Schedule.objects.all(), request.user), caller_key_type(request))
        schedules = list(mine.order_by("-id")[:500])
        return Response({
            "schedules": _schedule_body(schedules),
            "scheduled_messages": selectors.scheduled_messages(client=request.user.service,
                                                               key_type=caller_key_type(request)),
            "queue_snapshot": selectors.queue_snapshot(now=now),
            "due_set": _due_set_body(now.timestamp()),
        })

    @extend_schema(request=InputSerializer, responses={201: ScheduleOutputSerializer},
                   examples=[OpenApiExample("Every Monday at 09:00", value=RECURRING_EXAMPLE,
                                            request_only=True)])
    def post(self, request: Request) -> Response:
        """Create a recurring (cron) schedule."""
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        team_key_audience_check(request.user, data["definition"].get("recipients"),
                                field="definition.recipients")
        try:
            schedule = schedule_create_recurring(
                client=request.user.service, name=data["name"], cron=data["cron"],
                timezone=data["timezone"], definition=data["definition"], now=timezone.now(),
                key_type=caller_key_type(request),
            )
        except timing.TimingError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from exc
        return Response(_schedule_body([schedule])[0], status=status.HTTP_201_CREATED)


def _own_schedule(request: Request, schedule_id: int) -> Schedule:
    return owned_or_404(Schedule.objects.all(), request.user, message="No such schedule.", pk=schedule_id)


@extend_schema(responses={200: ScheduleOutputSerializer})
class ScheduleDetailApi(APIView):
    required_scope = "schedules"
    throttle_scope = "schedules"

    def get(self, request: Request, schedule_id: int) -> Response:
        """One schedule."""
        return Response(_schedule_body([_own_schedule(request, schedule_id)])[0])

    def delete(self, request: Request, schedule_id: int) -> Response:
        """Cancel a schedule."""
        schedule = schedule_cancel(schedule=_own_schedule(request, schedule_id))
        return Response(_schedule_body([schedule])[0])


@extend_schema(request=None, responses={200: ScheduleOutputSerializer})
class SchedulePauseApi(APIView):
    required_scope = "schedules"
    throttle_scope = "schedules"

    def post(self, request: Request, schedule_id: int) -> Response:
        """Pause a schedule."""
        schedule = schedule_pause(schedule=_own_schedule(request, schedule_id))
        return Response(_schedule_body([schedule])[0])


@extend_schema(request=None, responses={200: ScheduleOutputSerializer})
class ScheduleResumeApi(APIView):
    required_scope = "schedules"
    throttle_scope = "schedules"

    def post(self, request: Request, schedule_id: int) -> Response:
        """Resume a paused schedule."""
        schedule = schedule_resume(schedule=_own_schedule(request, schedule_id), now=timezone.now())
        return Response(_schedule_body([schedule])[0])


class ScheduleCancelByKeyApi(APIView):
    # Whoever may send a delayed message may also call it off.
    required_scope = ("send", "schedules")
    throttle_scope = "schedules"

    class InputSerializer(serializers.Serializer):
        cancel_key = serializers.CharField(max_length=200)

    class OutputSerializer(serializers.Serializer):
        cancel_key = serializers.CharField()
        cancelled = serializers.IntegerField(help_text="Sends called off now.")
        message_ids = serializers.ListField(child=serializers.IntegerField(), help_text="Their ids.")
        already_dispatched = serializers.IntegerField(help_text="Sends with this key already on their way.")

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer},
                   examples=[OpenApiExample("The tour's delayed send", value={"cancel_key": "cart-1"},
                                            request_only=True)])
    def post(self, request: Request) -> Response:
        """Cancel every pending delayed send carrying this cancel_key."""
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        key = serializer.validated_data["cancel_key"]
        result = messages_cancel_by_key(client_id=request.user.pk, cancel_key=key)
        return Response({"cancel_key": key, "cancelled": len(result.cancelled),
                         "message_ids": result.cancelled, "already_dispatched": result.already_dispatched})

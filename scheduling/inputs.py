"""The `schedule` object of POST /api/v1/messages: validated, then resolved to a due instant.

    {"type": "immediate"}                                          (default)
    {"type": "scheduled", "send_at": "2026-12-01T09:00:00+01:00"}  (offset required; future)
    {"type": "delayed", "delay_seconds": 86400, "cancel_key": "cart-42"}
    {"type": "local_time", "local_time": "09:00", "date": "2026-12-01", "timezone": "Europe/Berlin"}
    {"type": "optimal"}                                            (best open hour, else 10:00)

`timezone` for local_time/optimal: the request's, else the recipient contact's, else
NOTIFIER_DEFAULT_TIMEZONE, else 400 on `schedule.timezone`. Errors name the field under
`schedule` so the API answers {"error": {"fields": {"schedule.send_at": [...]}}}.
Recurring schedules belong to campaigns (POST /api/v1/schedules), not to single messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from rest_framework import serializers

from scheduling import selectors, timing

MAX_DELAY_SECONDS = 366 * 24 * 3600
MAX_AHEAD = timedelta(days=366)
MESSAGE_TYPES = ["immediate", "scheduled", "delayed", "local_time", "optimal"]
REQUIRED = {"scheduled": ["send_at"], "delayed": ["delay_seconds"], "local_time": ["local_time"]}


@dataclass(frozen=True)
class ResolvedSchedule:
    type: str
    due_at: datetime | None  # None: send now
    cancel_key: str = ""


def parse_aware_datetime(value: str, field: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise timing.TimingError(field, f"Expected ISO 8601 with an offset, got {value!r}.") from exc
    if parsed.tzinfo is None:
        raise timing.TimingError(field, "The time needs a UTC offset (e.g. +01:00 or Z).")
    return parsed


class ScheduleInputSerializer(serializers.Serializer):
    type = serializers.ChoiceField(
        choices=MESSAGE_TYPES, default="immediate",
        help_text="scheduled needs send_at, delayed delay_seconds, local_time local_time.")
    send_at = serializers.CharField(required=False, max_length=64,
                                    help_text="ISO 8601 with an offset, in the future (scheduled).")
    delay_seconds = serializers.IntegerField(required=False, min_value=1, max_value=MAX_DELAY_SECONDS)
    cancel_key = serializers.CharField(required=False, max_length=200,
                                       help_text="Cancel with POST /api/v1/schedules/cancel.")
    local_time = serializers.CharField(required=False, max_length=16,
                                       help_text="HH:MM in the recipient's zone (local_time).")
    date = serializers.DateField(required=False, help_text="The day (local_time); default the next.")
    timezone = serializers.CharField(
        required=False, max_length=64,
        help_text="IANA zone (local_time, optimal); default the contact's, then the platform's.")

    def validate(self, attrs: dict) -> dict:
        missing = {name: ["This field is required for this type."]
                   for name in REQUIRED.get(attrs["type"], []) if name not in attrs}
        if missing:
            raise serializers.ValidationError(missing)
        return attrs


def _local_due(spec: dict, *, recipient: str, client_id: str, now: datetime) -> datetime:
    at = timing.parse_local_time(spec["local_time"])
    tz = timing.zone(selectors.recipient_timezone(client_id=client_id, email=recipient,
                                                  requested=spec.get("timezone")))
    day: date | None = spec.get("date")
    return timing.next_occurrence(at, tz, now=now, day=day)


def _optimal_due(spec: dict, *, recipient: str, client_id: str, now: datetime) -> datetime:
    tz_name = selectors.recipient_timezone(client_id=client_id, email=recipient,
                                           requested=spec.get("timezone"))
    return selectors.optimal_due(recipients={recipient: tz_name}, now=now)[recipient]


def _due(spec: dict, *, recipient: str, client_id: str, now: datetime) -> datetime | None:
    kind = spec["type"]
    if kind == "scheduled":
        due = parse_aware_datetime(spec["send_at"], "send_at")
        if due <= now:
            raise timing.TimingError("send_at", "send_at is in the past.")
        return due
    if kind == "delayed":
        return now + timedelta(seconds=spec["delay_seconds"])
    if kind == "local_time":
        return _local_due(spec, recipient=recipient, client_id=client_id, now=now)
    if kind == "optimal":
        return _optimal_due(spec, recipient=recipient, client_id=client_id, now=now)
    return None


def schedule_resolve(spec: dict | None, *, recipient: str, client_id: str, now: datetime) -> ResolvedSchedule:
    """The due instant for a validated `schedule` (a serializers.ValidationError naming the
    field under `schedule` otherwise); the recipient's timezone is the sending client's contact's."""
    spec = spec or {"type": "immediate"}
    try:
        due = _due(spec, recipient=recipient, client_id=client_id, now=now)
        if due is not None and due - now > MAX_AHEAD:
            raise timing.TimingError(_main_field(spec["type"]), "At most 366 days ahead.")
    except timing.TimingError as exc:
        raise serializers.ValidationError({"schedule": {exc.field: [str(exc)]}}) from exc
    if spec.get("cancel_key") and due is None:
        message = "Only a future send can be cancelled."
        raise serializers.ValidationError({"schedule": {"cancel_key": [message]}})
    return ResolvedSchedule(type=spec["type"], due_at=due, cancel_key=spec.get("cancel_key", ""))


def _main_field(kind: str) -> str:
    return {"scheduled": "send_at", "delayed": "delay_seconds", "local_time": "local_time"}.get(kind, "type")

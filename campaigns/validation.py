"""Validation of a campaign definition (the POST /notifications/email body).

Errors name the field, e.g. `{"recipients": {"segment_id": ["No segment '7'."]}}` (the answer's
`fields` says `recipients.segment_id`, core/api/errors.py); inline
contact rows are checked by audience.validation. The template, list and segment must be the
launching client's own (`context["client_id"]`): another client's is "no such ...", like a
missing one, and the audience snapshot records whose contacts it reaches (decision 50).
"""

from __future__ import annotations

import json

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from audience.models import ContactList, Segment
from audience.segments import SegmentError, segment_compile
from audience.topic_fields import TopicReferenceField
from audience.topics import topic_for_send
from audience.validation import inline_contacts_clean
from campaigns.campaign_schedule import campaign_schedule_clean
from core.priorities import Priority
from templates.services import template_version_for_send

MAX_METADATA_BYTES = 16 * 1024


class InlineContactSerializer(serializers.Serializer):
    email = serializers.EmailField(max_length=254)
    name = serializers.CharField(max_length=200, required=False)
    timezone = serializers.CharField(max_length=64, required=False, help_text="IANA, e.g. Europe/Berlin")
    data = serializers.DictField(required=False, help_text="Merge data for the template.")


class RecipientsSerializer(serializers.Serializer):
    """The audience, for the schema: `validate_recipients` checks it (the list and segment must
    be the client's own; inline rows by audience.validation, naming each bad row)."""

    type = serializers.ChoiceField(choices=["segment", "list", "inline"])
    segment_id = serializers.IntegerField(required=False, help_text="type segment")
    list_id = serializers.IntegerField(required=False, help_text="type list")
    contacts = InlineContactSerializer(many=True, required=False,
                                       help_text="type inline: at most 10,000 rows")


class CampaignScheduleSerializer(serializers.Serializer):
    """When, for the schema: campaigns.campaign_schedule.campaign_schedule_clean checks it."""

    type = serializers.ChoiceField(
        choices=["immediate", "scheduled", "local_time", "optimal", "recurring"], default="immediate",
        help_text="scheduled needs send_at; local_time local_time; recurring cron (a schedule, "
                  "answered 201, launching a campaign at each run).")
    send_at = serializers.CharField(required=False, help_text="ISO 8601 with an offset, in the future.")
    local_time = serializers.CharField(required=False, help_text="HH:MM in each contact's zone.")
    date = serializers.DateField(required=False)
    timezone = serializers.CharField(required=False,
                                     help_text="recurring: the cron's zone; else for contacts without one.")
    cron = serializers.CharField(required=False, help_text="recurring: five fields, e.g. 0 17 * * 5.")


@extend_schema_field(RecipientsSerializer)
class RecipientsField(serializers.DictField):
    pass


@extend_schema_field(CampaignScheduleSerializer)
class CampaignScheduleField(serializers.DictField):
    pass


class CampaignDefinitionSerializer(serializers.Serializer):
    campaign_id = serializers.CharField(
        max_length=200, required=False, allow_blank=False,
        help_text="Your label: the same label again answers the first campaign (nothing sent twice).")
    name = serializers.CharField(max_length=200, required=False)
    template_id = serializers.CharField(max_length=100, help_text="A template id or name.")
    recipients = RecipientsField()
    schedule = CampaignScheduleField(required=False, default=lambda: {"type": "immediate"})
    priority = serializers.ChoiceField(choices=[p.label for p in Priority], default="normal")
    metadata = serializers.DictField(required=False, default=dict, help_text="At most 16 KiB, kept.")
    topic = TopicReferenceField(required=False)

    def validate(self, attrs: dict) -> dict:
        # Here, not in validate_topic: topic_for_send's error names the field itself.
        if "topic" in attrs:
            attrs["topic"] = topic_for_send(self.context["client_id"], attrs["topic"])
        return attrs

    def validate_template_id(self, value: str):
        return template_version_for_send(client_id=self.context["client_id"], reference=value)

    def validate_schedule(self, value: dict) -> dict:
        return campaign_schedule_clean(value, now=timezone.now())

    def validate_metadata(self, value: dict) -> dict:
        if len(json.dumps(value, default=str)) > MAX_METADATA_BYTES:
            raise serializers.ValidationError("Metadata is larger than 16 KiB.")
        return value

    def validate_recipients(self, value: dict) -> dict:
        kind = value.get("type")
        client_id = self.context["client_id"]
        if kind == "segment":
            return {**_segment_audience(value, client_id), "client_id": client_id}
        if kind == "list":
            return {**_list_audience(value, client_id), "client_id": client_id}
        if kind == "inline":
            contacts = inline_contacts_clean(value.get("contacts"))
            return {"type": "inline", "contacts": contacts, "client_id": client_id}
        raise serializers.ValidationError({"type": ["Must be 'segment', 'list' or 'inline'."]})


def _segment_audience(value: dict, client_id: str | None) -> dict:
    segment = Segment.objects.filter(pk=_int_id(value, "segment_id"), client_id=client_id).first()
    if segment is None:
        raise serializers.ValidationError({"segment_id": [f"No segment {value.get('segment_id')!r}."]})
    try:
        segment_compile(segment.definition)
    except SegmentError as exc:
        raise serializers.ValidationError({"segment_id": [f"Segment is invalid: {exc}"]}) from exc
    return {"type": "segment", "segment_id": segment.pk, "definition": segment.definition}


def _list_audience(value: dict, client_id: str | None) -> dict:
    list_id = _int_id(value, "list_id")
    if not ContactList.objects.filter(pk=list_id, client_id=client_id).exists():
        raise serializers.ValidationError({"list_id": [f"No list {value.get('list_id')!r}."]})
    return {"type": "list", "list_id": list_id}


def _int_id(value: dict, name: str) -> int:
    raw = value.get(name)
    if isinstance(raw, bool) or not isinstance(raw, int | str) or not str(raw).isdigit():
        raise serializers.ValidationError({name: ["Must be an integer id."]})
    return int(raw)

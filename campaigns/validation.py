"""Validation of contacts and of a campaign definition (the POST /notifications/email body).

Contact rows are checked with plain functions, not one DRF serializer per row: 10,000 rows
must validate in well under a second. Errors name the row and field, e.g.
`{"recipients": {"contacts": {"12": {"email": ["Enter a valid email address."]}}}}`.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any
from zoneinfo import available_timezones

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import validate_email
from rest_framework import serializers

from campaigns.models import ContactList, Segment
from campaigns.segments import SegmentError, segment_compile
from core.priorities import Priority
from templates.services import template_version_get_current

MAX_INLINE = 10_000
MAX_DATA_BYTES = 16 * 1024
MAX_METADATA_BYTES = 16 * 1024
CONTACT_FIELDS = {"email", "name", "timezone", "locale", "subscribed", "attributes", "data"}


class AudienceTooLargeError(Exception):
    """More inline recipients than one request may carry (the API's 413)."""


@cache
def _zones() -> frozenset[str]:
    return frozenset(available_timezones())


def contact_row_clean(row: Any, *, allow: set[str]) -> tuple[dict | None, dict[str, list[str]]]:
    """(cleaned row, {}) or (None, {field: [errors]}) for one contact row."""
    if not isinstance(row, dict):
        return None, {"non_field_errors": ["Each contact must be an object."]}
    errors: dict[str, list[str]] = {}
    unknown = set(row) - allow
    if unknown:
        errors["non_field_errors"] = [f"Unknown keys: {', '.join(sorted(unknown))}."]
    email = row.get("email")
    try:
        if not isinstance(email, str) or len(email) > 254:
            raise DjangoValidationError("invalid")
        validate_email(email)
    except DjangoValidationError:
        errors["email"] = ["Enter a valid email address."]
    clean = {"email": email.strip().lower() if isinstance(email, str) else ""}
    _text(row, "name", 200, clean, errors)
    _text(row, "locale", 16, clean, errors)
    _text(row, "timezone", 64, clean, errors)
    if clean.get("timezone") and clean["timezone"] not in _zones():
        errors["timezone"] = [f"Unknown IANA time zone {clean['timezone']!r}."]
    for name in ("attributes", "data"):
        if name in row:
            value = row[name]
            if not isinstance(value, dict) or len(json.dumps(value, default=str)) > MAX_DATA_BYTES:
                errors[name] = ["Must be an object of at most 16 KiB."]
            clean[name] = value
    if "subscribed" in row:
        if not isinstance(row["subscribed"], bool):
            errors["subscribed"] = ["Must be true or false."]
        clean["subscribed"] = row["subscribed"]
    return (None, errors) if errors else (clean, {})


def _text(row: dict, name: str, limit: int, clean: dict, errors: dict) -> None:
    if name not in row:
        return
    value = row[name]
    if not isinstance(value, str) or len(value) > limit or "\n" in value or "\r" in value:
        errors[name] = [f"Must be one line of at most {limit} characters."]
        return
    clean[name] = value.strip()


def inline_contacts_clean(contacts: Any) -> list[dict]:
    """All rows valid, de-duplicated by email (last wins), or a ValidationError naming rows."""
    if not isinstance(contacts, list) or not contacts:
        raise serializers.ValidationError({"contacts": ["Must be a non-empty list."]})
    if len(contacts) > MAX_INLINE:
        raise AudienceTooLargeError(
            f"{len(contacts)} inline recipients: at most {MAX_INLINE} per request. "
            "Upload them with POST /api/v1/contacts/bulk (with a list) and send to the list."
        )
    allow = {"email", "name", "timezone", "data"}
    cleaned, errors = {}, {}
    for index, row in enumerate(contacts):
        clean, row_errors = contact_row_clean(row, allow=allow)
        if row_errors:
            errors[str(index)] = row_errors
        else:
            cleaned[clean["email"]] = clean
    if errors:
        raise serializers.ValidationError({"contacts": dict(list(errors.items())[:100])})
    return list(cleaned.values())


class CampaignDefinitionSerializer(serializers.Serializer):
    campaign_id = serializers.CharField(max_length=200, required=False, allow_blank=False)
    name = serializers.CharField(max_length=200, required=False)
    template_id = serializers.CharField(max_length=100)
    recipients = serializers.DictField()
    schedule = serializers.DictField(required=False, default=lambda: {"type": "immediate"})
    priority = serializers.ChoiceField(choices=[p.label for p in Priority], default="normal")
    metadata = serializers.DictField(required=False, default=dict)

    def validate_template_id(self, value: str):
        version = template_version_get_current(reference=value)
        if version is None:
            raise serializers.ValidationError(f"No active template {value!r}.")
        return version

    def validate_schedule(self, value: dict) -> dict:
        from django.utils import timezone

        from campaigns.campaign_schedule import campaign_schedule_clean

        clean = campaign_schedule_clean(value, now=timezone.now())
        return clean

    def validate_metadata(self, value: dict) -> dict:
        if len(json.dumps(value, default=str)) > MAX_METADATA_BYTES:
            raise serializers.ValidationError("Metadata is larger than 16 KiB.")
        return value

    def validate_recipients(self, value: dict) -> dict:
        kind = value.get("type")
        if kind == "segment":
            return _segment_audience(value)
        if kind == "list":
            return _list_audience(value)
        if kind == "inline":
            return {"type": "inline", "contacts": inline_contacts_clean(value.get("contacts"))}
        raise serializers.ValidationError({"type": ["Must be 'segment', 'list' or 'inline'."]})


def _segment_audience(value: dict) -> dict:
    segment = Segment.objects.filter(pk=_int_id(value, "segment_id")).first()
    if segment is None:
        raise serializers.ValidationError({"segment_id": [f"No segment {value.get('segment_id')!r}."]})
    try:
        segment_compile(segment.definition)
    except SegmentError as exc:
        raise serializers.ValidationError({"segment_id": [f"Segment is invalid: {exc}"]}) from exc
    return {"type": "segment", "segment_id": segment.pk, "definition": segment.definition}


def _list_audience(value: dict) -> dict:
    list_id = _int_id(value, "list_id")
    if not ContactList.objects.filter(pk=list_id).exists():
        raise serializers.ValidationError({"list_id": [f"No list {value.get('list_id')!r}."]})
    return {"type": "list", "list_id": list_id}


def _int_id(value: dict, name: str) -> int:
    raw = value.get(name)
    if isinstance(raw, bool) or not isinstance(raw, int | str) or not str(raw).isdigit():
        raise serializers.ValidationError({name: ["Must be an integer id."]})
    return int(raw)

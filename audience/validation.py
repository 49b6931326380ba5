"""Validation of contact rows (bulk upload, CSV import, a campaign's inline recipients).

Contact rows are checked with plain functions, not one DRF serializer per row: 10,000 rows
must validate in well under a second. Errors name the row and field, e.g.
`{"recipients": {"contacts": {12: {"email": ["Enter a valid email address."]}}}}`, which the API
answers as `recipients.contacts[12].email` (core/api/errors.py).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any
from zoneinfo import available_timezones

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import validate_email
from rest_framework import serializers

MAX_INLINE = 10_000
MAX_DATA_BYTES = 16 * 1024
CONTACT_FIELDS = {"email", "name", "timezone", "locale", "subscribed", "attributes", "data", "topics"}
MAX_TOPIC_CHOICES = 100


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
    if "topics" in row:
        _topic_choices(row["topics"], clean, errors)
    return (None, errors) if errors else (clean, {})


def _topic_choices(value: Any, clean: dict, errors: dict) -> None:
    """`{"<topic id or name>": true|false}`: the row's own choices (the service resolves the
    names); a bad value is named `topics.<key>`."""
    if not isinstance(value, dict) or len(value) > MAX_TOPIC_CHOICES:
        errors["topics"] = [f"Must be an object of at most {MAX_TOPIC_CHOICES} topics, "
                            '{"<topic id or name>": true or false}.']
        return
    for key, choice in value.items():
        if not isinstance(choice, bool):
            errors[f"topics.{key}"] = ["Must be true or false."]
    clean["topics"] = value


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
            errors[index] = row_errors  # `contacts[1].email` in the answer
        else:
            cleaned[clean["email"]] = clean
    if errors:
        raise serializers.ValidationError({"contacts": dict(list(errors.items())[:100])})
    return list(cleaned.values())

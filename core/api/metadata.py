"""A service's own references on a message (`metadata`): a flat object, bounded.

    metadata = MetadataField()      # {"order_id": "A-1001", "attempt": 2, "vip": true}

Flat (string, number or bool values; no object, list or null) so every value can be matched
exactly by `GET /api/v1/messages?metadata[<key>]=<value>` and copied into an event as it was sent.
Keys are `[A-Za-z0-9_-]`: a key is named in query strings (`metadata[order_id]`) and error paths
(`metadata.order_id`), where a dot, a bracket or a space would be ambiguous.
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

MAX_KEYS = 20
MAX_KEY_CHARS = 40
MAX_VALUE_CHARS = 500
METADATA_KEY = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_KEY_CHARS}}}")
Scalar = str | int | float | bool


def metadata_value_error(value: Any) -> str | None:
    """Why `value` cannot be a metadata value, or None."""
    if isinstance(value, bool | int):
        return None if abs(int(value)) < 2**53 else "Numbers must be within +/-2^53."
    if isinstance(value, float):
        return None if value == value and abs(value) != float("inf") else "Not a finite number."
    if not isinstance(value, str):
        return "Must be a string, a number or a boolean."
    if len(value) > MAX_VALUE_CHARS:
        return f"At most {MAX_VALUE_CHARS} characters."
    if "\x00" in value:  # jsonb cannot store U+0000: a 400 here, not a 500 at the INSERT
        return "NUL characters are not allowed."
    return None


def metadata_key_error(key: Any) -> str | None:
    if not isinstance(key, str) or not METADATA_KEY.fullmatch(key):
        return f"Keys are 1 to {MAX_KEY_CHARS} characters of A-Z, a-z, 0-9, '_' and '-'."
    return None


METADATA_SCHEMA = {
    "type": "object", "maxProperties": MAX_KEYS,
    "additionalProperties": {"oneOf": [{"type": "string", "maxLength": MAX_VALUE_CHARS},
                                       {"type": "number"}, {"type": "boolean"}]},
    "example": {"order_id": "A-1001", "attempt": 2},
}


@extend_schema_field(METADATA_SCHEMA)
class MetadataField(serializers.Field):
    """Up to 20 keys of up to 40 characters, each value a string of up to 500 characters, a
    number or a boolean. An error names the key (`metadata.<key>`), or `metadata` itself."""

    default_error_messages = {
        "not_a_dict": "Expected an object of up to 20 keys.",
        "too_many": f"At most {MAX_KEYS} keys.",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault("help_text", f"Your own references (up to {MAX_KEYS} keys of up to "
                                       f"{MAX_KEY_CHARS} characters [A-Za-z0-9_-], each value a "
                                       f"string of up to {MAX_VALUE_CHARS} characters, a number "
                                       "or a boolean): shown by GET /api/v1/messages/{id}, "
                                       "searchable with `metadata[<key>]=<value>`.")
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> dict[str, Scalar]:
        if not isinstance(data, dict):
            self.fail("not_a_dict")
        if len(data) > MAX_KEYS:
            self.fail("too_many")
        errors: dict[str, list[str]] = {}
        for key, value in data.items():
            problem = metadata_key_error(key) or metadata_value_error(value)
            if problem:
                errors[str(key)[:MAX_KEY_CHARS * 2]] = [problem]
        if errors:
            raise serializers.ValidationError(errors)
        return dict(data) or None  # {} is no metadata: the row stores NULL, as when none is sent

    def to_representation(self, value: Any) -> Any:
        return value

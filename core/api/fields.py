"""Bounded, injection-proof serializer fields for every API (adopt them in one line).

    class InputSerializer(StrictInputMixin, serializers.Serializer):   # unknown keys -> 400
    subject = SafeLineField(max_length=255)          # one header-safe line
    to = SafeEmailField()                            # an address that cannot smuggle headers,
                                                     # its domain stored in IDNA A-label form
    recipients = RecipientListField()                # at most NOTIFIER_API_MAX_RECIPIENTS
    headers = CustomHeadersField()                   # only NOTIFIER_API_ALLOWED_HEADERS
    context = ContextField()                         # at most NOTIFIER_API_MAX_CONTEXT_BYTES

Header injection is refused in every spelling we know of: raw CR/LF, the other line breaks
Python's str.splitlines() and some MTAs honour (VT, FF, NEL, U+2028, U+2029), NUL,
percent-encoded newlines (%0d%0a, also double-encoded %250a) and RFC 2047 encoded words that
decode to a newline (=?utf-8?q?=0D=0A?=). A refused value is a 400 naming the field.
"""

from __future__ import annotations

import json
import re
from email.header import decode_header
from typing import Any
from urllib.parse import unquote

from django.conf import settings
from rest_framework import serializers

from core.addresses import AddressError, ascii_domain_address
from core.list_headers import HeaderError, is_url_list, url_list_header_line

# Characters that end a line for some parser between us and the recipient.
_LINE_BREAKS = re.compile("[\r\n\x00\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_ENCODED_WORD = re.compile(r"=\?[^?]+\?[bBqQ]\?[^?]*\?=")
HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,76}$")
MAX_CONTEXT_DEPTH = 8


def has_line_break(value: str) -> bool:
    """True if the value contains, or decodes to, anything that could end a header line."""
    candidates = [value]
    decoded = value
    for _ in range(3):  # percent-decoding, up to triple-encoded
        decoded = unquote(decoded)
        candidates.append(decoded)
    for word in _ENCODED_WORD.findall(value):
        try:
            for part, charset in decode_header(word):
                text = part.decode(charset or "ascii", "replace") if isinstance(part, bytes) else part
                candidates.append(text)
        except (ValueError, LookupError):
            return True  # an undecodable encoded word is not something we pass on
    return any(_LINE_BREAKS.search(text) for text in candidates)


def validate_header_safe(value: str) -> str:
    if has_line_break(value):
        raise serializers.ValidationError(
            "Line breaks (also encoded, e.g. %0d%0a or \\u2028) are not allowed here."
        )
    return value


class _HeaderSafeMixin:
    """Checks the raw input, before CharField trims whitespace (U+2028 counts as whitespace):
    a value that tried to inject is refused, not silently repaired."""

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, str):
            validate_header_safe(data)
        return super().to_internal_value(data)  # type: ignore[misc]


class SafeLineField(_HeaderSafeMixin, serializers.CharField):
    """One line of text that is safe to put in an email header."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 998)  # RFC 5322 2.1.1: lines at most 998 characters
        super().__init__(**kwargs)


class SafeEmailField(_HeaderSafeMixin, serializers.EmailField):
    """An address whose domain is stored as the wire carries it (`user@xn--bcher-kva.example`
    for `user@bücher.example`): Django's validator lets through domains IDNA 2008 refuses (a
    symbol such as U+2603), which would only fail at send time, and the ESPs report bounces
    with the encoded domain, which suppression must match."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 254)  # RFC 5321 path limit
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        try:
            return ascii_domain_address(value)
        except AddressError as exc:
            raise serializers.ValidationError(f"Enter a valid email address: {exc}.") from None


class RecipientListField(serializers.ListField):
    """Addresses for one inline call, at most NOTIFIER_API_MAX_RECIPIENTS, no duplicates."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("child", SafeEmailField())
        kwargs.setdefault("min_length", 1)
        kwargs.setdefault("max_length", settings.NOTIFIER_API_MAX_RECIPIENTS)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> list[str]:
        values = super().to_internal_value(data)
        lowered = [value.lower() for value in values]
        if len(set(lowered)) != len(lowered):
            raise serializers.ValidationError("Duplicate recipients.")
        return values


class CustomHeadersField(serializers.DictField):
    """Extra headers a caller may set: only names in NOTIFIER_API_ALLOWED_HEADERS."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("child", SafeLineField(max_length=998))
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> dict[str, str]:
        values = super().to_internal_value(data)
        allowed = {name.lower(): name for name in settings.NOTIFIER_API_ALLOWED_HEADERS}
        if len(values) > 20:
            raise serializers.ValidationError("At most 20 custom headers.")
        refused = sorted(name for name in values
                         if name.lower() not in allowed or not HEADER_NAME.match(name))
        if refused:
            raise serializers.ValidationError(
                f"Headers not allowed: {', '.join(refused)}; allowed: {', '.join(allowed.values())}."
            )
        headers = {allowed[name.lower()]: value for name, value in values.items()}
        for name, value in headers.items():
            if is_url_list(name):  # an operator may allow List-*: a URL too long for a line is
                try:               # refused here rather than failing at send (issue 32)
                    url_list_header_line(name, value)
                except HeaderError as exc:
                    raise serializers.ValidationError(str(exc)) from exc
        return headers


def _walk(value: Any, depth: int) -> None:
    if depth > MAX_CONTEXT_DEPTH:
        raise serializers.ValidationError(f"Nested deeper than {MAX_CONTEXT_DEPTH} levels.")
    if isinstance(value, dict):
        for key, item in value.items():
            _walk(key, depth + 1)
            _walk(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _walk(item, depth + 1)
    elif isinstance(value, str) and "\x00" in value:
        # PostgreSQL's jsonb cannot store U+0000: refuse it here rather than fail with a 500.
        raise serializers.ValidationError("NUL characters are not allowed.")


def validate_context(value: dict) -> dict:
    """Bounded merge data: size (NOTIFIER_API_MAX_CONTEXT_BYTES), depth, no NUL."""
    limit = settings.NOTIFIER_API_MAX_CONTEXT_BYTES
    if len(json.dumps(value, default=str)) > limit:
        raise serializers.ValidationError(f"Context is larger than {limit} bytes.")
    _walk(value, 0)
    return value


class ContextField(serializers.DictField):
    """Template merge data: a JSON object, bounded in size and depth."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("default", dict)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> dict:
        return validate_context(super().to_internal_value(data))


class StrictInputMixin:
    """Refuse unknown keys (400 naming them) instead of silently ignoring them, so a caller who
    sends `headers` or `bcc` where none are accepted learns it. The schema says
    `additionalProperties: false` for these serializers (core/api/schema.py)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))  # type: ignore[attr-defined]
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)  # type: ignore[misc]

"""The single exception type raised by every webhook verifier."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Machine-readable rejection reasons (stable: safe to log, count and alert on)."""

    MALFORMED_PAYLOAD = "malformed_payload"
    MISSING_FIELD = "missing_field"
    UNSUPPORTED_MESSAGE_TYPE = "unsupported_message_type"
    UNSUPPORTED_SIGNATURE_VERSION = "unsupported_signature_version"
    TOPIC_NOT_ALLOWED = "topic_not_allowed"
    CERT_URL_NOT_HTTPS = "cert_url_not_https"
    CERT_HOST_NOT_ALLOWED = "cert_host_not_allowed"
    CERT_PATH_NOT_ALLOWED = "cert_path_not_allowed"
    CERT_FETCH_FAILED = "cert_fetch_failed"
    BAD_CERTIFICATE = "bad_certificate"
    MISSING_SIGNATURE = "missing_signature"
    MISSING_TIMESTAMP = "missing_timestamp"
    BAD_TIMESTAMP = "bad_timestamp"
    STALE_TIMESTAMP = "stale_timestamp"
    FUTURE_TIMESTAMP = "future_timestamp"
    BAD_SIGNATURE = "bad_signature"
    REPLAYED_TOKEN = "replayed_token"


class WebhookVerificationError(Exception):
    """A webhook request failed authentication; nothing from it may be trusted.

    ``reason`` is one of :class:`Reason` (a ``str``); ``detail`` is free text for logs only
    and must never be echoed to the caller.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = str(reason)
        self.detail = detail

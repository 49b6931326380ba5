"""Mailgun webhook signature verification (JSON "event-data" webhooks).

Mailgun docs, "Securing Webhooks": signature = hex(HMAC-SHA256(webhook_signing_key,
timestamp + token)). The signature block travels in the body:
``{"signature": {"timestamp", "token", "signature"}, "event-data": {...}}``. Mailgun also
recommends rejecting stale timestamps and caching tokens to refuse replays.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

from delivery.providers.webhooks.clock import Clock, check_window, parse_epoch
from delivery.providers.webhooks.errors import Reason, WebhookVerificationError
from delivery.providers.webhooks.replay import ReplayGuard

DEFAULT_TOLERANCE = 300  # seconds
_MAX_TOKEN_LENGTH = 256  # Mailgun tokens are 50 hex chars; bounds our replay-key size


class MailgunVerifier:
    """Verifies Mailgun webhook bodies. Construct once and reuse."""

    def __init__(
        self,
        signing_key: str,
        replay_guard: ReplayGuard,
        *,
        tolerance: float = DEFAULT_TOLERANCE,
        clock: Clock = time.time,
    ) -> None:
        if not signing_key:
            raise ValueError("Mailgun webhook signing key is empty")
        self._key = signing_key.encode("utf-8")
        self._guard = replay_guard
        self._tolerance = tolerance
        self._clock = clock

    def verify(self, body: bytes | str) -> dict[str, Any]:
        """Verify a raw webhook body; return the parsed payload (with "event-data")."""
        payload = _parse_payload(body)
        timestamp, token, signature = _signature_fields(payload)
        signed_at = parse_epoch(timestamp)
        self._check_signature(timestamp, token, signature)
        check_window(signed_at, self._clock(), self._tolerance)
        # The guard runs last so unauthenticated requests can't fill it with junk.
        # A token must be remembered while its timestamp is still accepted: at most
        # tolerance into the future plus tolerance into the past.
        if self._guard.seen_before(token, int(2 * self._tolerance) + 1):
            raise WebhookVerificationError(Reason.REPLAYED_TOKEN)
        return payload

    def verify_request(self, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        """`verify`: the signature block travels in the body, no header is read."""
        return self.verify(body)

    def _check_signature(self, timestamp: str, token: str, signature: str) -> None:
        expected = hmac.new(
            self._key, f"{timestamp}{token}".encode(), hashlib.sha256
        ).hexdigest()
        # compare_digest needs equal types; both are str of (normally) ASCII hex.
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8")):
            raise WebhookVerificationError(Reason.BAD_SIGNATURE)


def _parse_payload(body: bytes | str) -> dict[str, Any]:
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise WebhookVerificationError(Reason.MALFORMED_PAYLOAD, "invalid JSON") from err
    if not isinstance(payload, dict) or not isinstance(payload.get("event-data"), dict):
        raise WebhookVerificationError(Reason.MALFORMED_PAYLOAD, "missing event-data")
    return payload


def _signature_fields(payload: dict[str, Any]) -> tuple[str, str, str]:
    block = payload.get("signature")
    if not isinstance(block, dict):
        raise WebhookVerificationError(Reason.MISSING_SIGNATURE)
    # Mailgun sends timestamp as a string; accept an int too and sign its decimal form.
    timestamp = block.get("timestamp")
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        timestamp = str(timestamp)
    token, signature = block.get("token"), block.get("signature")
    if not isinstance(timestamp, str) or not timestamp:
        raise WebhookVerificationError(Reason.MISSING_TIMESTAMP)
    if not isinstance(signature, str) or not signature:
        raise WebhookVerificationError(Reason.MISSING_SIGNATURE)
    if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN_LENGTH:
        raise WebhookVerificationError(Reason.MISSING_FIELD, "signature.token")
    return timestamp, token, signature

"""SendGrid (Twilio) Signed Event Webhook verification.

Twilio SendGrid docs, "Getting Started with the Event Webhook Security Features": SendGrid
signs ``timestamp_header + raw_request_body`` with ECDSA P-256 / SHA-256. The signature
header carries a base64 DER (ASN.1) ECDSA signature; the verification key is shown in the
SendGrid UI/API as base64 DER SubjectPublicKeyInfo. The body must be the exact bytes
received: re-serialised JSON would not verify.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from delivery.providers.webhooks.clock import Clock, check_window, parse_epoch
from delivery.providers.webhooks.errors import Reason, WebhookVerificationError

SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"
DEFAULT_TOLERANCE = 300  # seconds


def load_sendgrid_public_key(value: str) -> ec.EllipticCurvePublicKey:
    """Load the verification key as SendGrid shows it (base64 DER); PEM also accepted.

    Raises ``ValueError`` on a bad key: that is a configuration error, not a bad request.
    """
    text = value.strip()
    if text.startswith("-----BEGIN"):
        key = serialization.load_pem_public_key(text.encode("ascii"))
    else:
        try:
            der = base64.b64decode(text, validate=True)
        except binascii.Error as err:
            raise ValueError("SendGrid public key is not base64") from err
        key = serialization.load_der_public_key(der)
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    raise ValueError("SendGrid public key must be an ECDSA P-256 key")


class SendGridVerifier:
    """Verifies one SendGrid event-webhook POST. Construct once and reuse."""

    def __init__(
        self,
        public_key: str,
        *,
        tolerance: float = DEFAULT_TOLERANCE,
        clock: Clock = time.time,
    ) -> None:
        self._key = load_sendgrid_public_key(public_key)
        self._tolerance = tolerance
        self._clock = clock

    def verify(
        self, payload: bytes, signature: str | None, timestamp: str | None
    ) -> list[dict[str, Any]]:
        """Check signature and timestamp headers against the raw body; return the events."""
        if not signature:
            raise WebhookVerificationError(Reason.MISSING_SIGNATURE)
        if not timestamp:
            raise WebhookVerificationError(Reason.MISSING_TIMESTAMP)
        signed_at = parse_epoch(timestamp)
        self._check_signature(payload, signature, timestamp)
        # Freshness after authenticity: a forged request should read as forged, not stale.
        check_window(signed_at, self._clock(), self._tolerance)
        return _parse_events(payload)

    def verify_request(self, body: bytes, headers: Mapping[str, str]) -> list[dict[str, Any]]:
        """`verify` with the signature and timestamp taken from the request's headers."""
        return self.verify(body, headers.get(SIGNATURE_HEADER), headers.get(TIMESTAMP_HEADER))

    def _check_signature(self, payload: bytes, signature: str, timestamp: str) -> None:
        try:
            der_signature = base64.b64decode(signature, validate=True)
            self._key.verify(
                der_signature, timestamp.encode("utf-8") + payload, ec.ECDSA(hashes.SHA256())
            )
        except (binascii.Error, InvalidSignature) as err:
            raise WebhookVerificationError(Reason.BAD_SIGNATURE) from err


def verify_sendgrid_request(
    payload: bytes,
    signature: str | None,
    timestamp: str | None,
    *,
    public_key: str,
    tolerance: float = DEFAULT_TOLERANCE,
    clock: Clock = time.time,
) -> list[dict[str, Any]]:
    """One-shot convenience wrapper around :class:`SendGridVerifier`."""
    verifier = SendGridVerifier(public_key, tolerance=tolerance, clock=clock)
    return verifier.verify(payload, signature, timestamp)


def _parse_events(payload: bytes) -> list[dict[str, Any]]:
    # The Event Webhook always POSTs a JSON array of event objects (batched).
    try:
        events = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as err:
        raise WebhookVerificationError(Reason.MALFORMED_PAYLOAD, "invalid JSON") from err
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise WebhookVerificationError(Reason.MALFORMED_PAYLOAD, "not a list of objects")
    return events

"""Amazon SNS message signature verification (SES notifications arrive through SNS).

Reference: AWS SNS developer guide, "Verifying the signatures of Amazon SNS messages" and
"Parsing Amazon SNS message formats". SignatureVersion 1 is SHA1withRSA, 2 is
SHA256withRSA (PKCS#1 v1.5), both over the canonical string built by
:func:`sns_string_to_sign`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from delivery.providers.ses.sns_certs import (
    DEFAULT_CERT_HOST_PATTERNS,
    CertificateStore,
    validate_signing_cert_url,
)
from delivery.providers.webhooks.clock import Clock
from delivery.providers.webhooks.errors import Reason, WebhookVerificationError

NOTIFICATION = "Notification"
SUBSCRIPTION_CONFIRMATION = "SubscriptionConfirmation"
UNSUBSCRIBE_CONFIRMATION = "UnsubscribeConfirmation"

# Keys of the string to sign, per message type, in the byte-sort order AWS documents.
# "Subject" is optional: it is included only when present in the message.
_NOTIFICATION_KEYS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
_CONFIRMATION_KEYS = (
    "Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type",
)
_SIGNED_KEYS: dict[str, tuple[str, ...]] = {
    NOTIFICATION: _NOTIFICATION_KEYS,
    SUBSCRIPTION_CONFIRMATION: _CONFIRMATION_KEYS,
    UNSUBSCRIBE_CONFIRMATION: _CONFIRMATION_KEYS,
}
_OPTIONAL_KEYS = frozenset({"Subject"})

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {"1": hashes.SHA1, "2": hashes.SHA256}

# Future skew we tolerate on Timestamp when a max age is configured.
_MAX_FUTURE_SKEW = 300.0


def sns_string_to_sign(message: dict[str, Any]) -> bytes:
    """Build the canonical bytes SNS signs: "Key\\nValue\\n" for each signed key, in order.

    Values are the JSON-decoded strings (escapes such as \\n already turned back into the
    real characters, as the AWS guide requires).
    """
    msg_type = message.get("Type")
    keys = _SIGNED_KEYS.get(msg_type) if isinstance(msg_type, str) else None
    if keys is None:
        raise WebhookVerificationError(Reason.UNSUPPORTED_MESSAGE_TYPE, repr(msg_type))
    parts: list[str] = []
    for key in keys:
        value = message.get(key)
        if value is None and key in _OPTIONAL_KEYS:
            continue
        if not isinstance(value, str):
            raise WebhookVerificationError(Reason.MISSING_FIELD, key)
        parts.append(f"{key}\n{value}\n")
    return "".join(parts).encode("utf-8")


class SnsVerifier:
    """Verifies SNS HTTP(S) deliveries. Construct once (per process) and reuse.

    Order of checks is deliberate: everything that needs no network (shape, TopicArn
    allowlist, certificate URL, timestamp) runs before the certificate store is asked.
    """

    def __init__(
        self,
        *,
        allowed_topic_arns: Iterable[str],
        certificate_store: CertificateStore,
        max_age: timedelta | None = None,
        clock: Clock = time.time,
        cert_host_patterns: Iterable[re.Pattern[str]] = DEFAULT_CERT_HOST_PATTERNS,
    ) -> None:
        self._topics = frozenset(allowed_topic_arns)
        self._store = certificate_store
        self._max_age = max_age
        self._clock = clock
        self._host_patterns = tuple(cert_host_patterns)

    def verify(self, body: bytes | str) -> dict[str, Any]:
        """Verify a raw SNS POST body; return the parsed SNS message on success."""
        message = _parse_json_object(body)
        signing_input = sns_string_to_sign(message)  # also validates Type and fields
        version = _signature_version(message)
        if message["TopicArn"] not in self._topics:
            raise WebhookVerificationError(Reason.TOPIC_NOT_ALLOWED, message["TopicArn"])
        cert_url = _required_str(message, "SigningCertURL")
        validate_signing_cert_url(cert_url, self._host_patterns)
        self._check_timestamp(message["Timestamp"])
        signature = _decode_signature(_required_str(message, "Signature"))
        public_key = _load_rsa_key(self._store.get(cert_url))
        _verify_rsa(public_key, signature, signing_input, _HASHES[version]())
        return message

    def verify_request(self, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        """`verify`: SNS signs the message itself, no header is read."""
        return self.verify(body)

    def _check_timestamp(self, value: str) -> None:
        sent_at = _parse_iso_timestamp(value).timestamp()  # always parsed: rejects garbage
        if self._max_age is None:
            return
        now = self._clock()
        if now - sent_at > self._max_age.total_seconds():
            raise WebhookVerificationError(Reason.STALE_TIMESTAMP, f"{now - sent_at:.0f}s old")
        if sent_at - now > _MAX_FUTURE_SKEW:
            raise WebhookVerificationError(Reason.FUTURE_TIMESTAMP, f"{sent_at - now:.0f}s ahead")


def verify_sns_message(
    body: bytes | str,
    *,
    allowed_topic_arns: Iterable[str],
    certificate_store: CertificateStore,
    max_age: timedelta | None = None,
    clock: Clock = time.time,
) -> dict[str, Any]:
    """One-shot convenience wrapper around :class:`SnsVerifier`."""
    verifier = SnsVerifier(
        allowed_topic_arns=allowed_topic_arns,
        certificate_store=certificate_store,
        max_age=max_age,
        clock=clock,
    )
    return verifier.verify(body)


def _parse_json_object(body: bytes | str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise WebhookVerificationError(Reason.MALFORMED_PAYLOAD, "invalid JSON") from err
    if not isinstance(data, dict):
        raise WebhookVerificationError(Reason.MALFORMED_PAYLOAD, "not a JSON object")
    return data


def _required_str(message: dict[str, Any], key: str) -> str:
    value = message.get(key)
    if not isinstance(value, str) or not value:
        raise WebhookVerificationError(Reason.MISSING_FIELD, key)
    return value


def _signature_version(message: dict[str, Any]) -> str:
    version = message.get("SignatureVersion")
    if version not in _HASHES:
        raise WebhookVerificationError(Reason.UNSUPPORTED_SIGNATURE_VERSION, repr(version))
    return str(version)


def _parse_iso_timestamp(value: str) -> datetime:
    # SNS sends ISO 8601 UTC, e.g. "2012-05-02T00:54:06.655Z" (3.11 accepts the "Z").
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as err:
        raise WebhookVerificationError(Reason.BAD_TIMESTAMP, value) from err
    if parsed.tzinfo is None:
        raise WebhookVerificationError(Reason.BAD_TIMESTAMP, f"naive {value}")
    return parsed


def _decode_signature(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as err:
        raise WebhookVerificationError(Reason.BAD_SIGNATURE, "signature is not base64") from err


def _load_rsa_key(pem: bytes) -> rsa.RSAPublicKey:
    try:
        key = x509.load_pem_x509_certificate(pem).public_key()
    except ValueError as err:
        raise WebhookVerificationError(Reason.BAD_CERTIFICATE, str(err)) from err
    if not isinstance(key, rsa.RSAPublicKey):
        raise WebhookVerificationError(Reason.BAD_CERTIFICATE, "not an RSA key")
    return key


def _verify_rsa(
    key: rsa.RSAPublicKey, signature: bytes, data: bytes, algorithm: hashes.HashAlgorithm
) -> None:
    try:
        key.verify(signature, data, padding.PKCS1v15(), algorithm)
    except InvalidSignature as err:
        raise WebhookVerificationError(Reason.BAD_SIGNATURE) from err

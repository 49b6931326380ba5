"""Test helpers: produce requests signed exactly as SNS, SendGrid and Mailgun sign them.

For tests and benchmarks only (generates throwaway keys); production code never imports testkit.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID

from delivery.providers.sendgrid.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER
from delivery.providers.ses.sns import NOTIFICATION, SUBSCRIPTION_CONFIRMATION, sns_string_to_sign
from delivery.providers.ses.sns_certs import StaticCertificateStore

TEST_REGION = "us-east-1"
TEST_TOPIC_ARN = f"arn:aws:sns:{TEST_REGION}:123456789012:notifier-ses-events"
TEST_CERT_URL = (
    f"https://sns.{TEST_REGION}.amazonaws.com/"
    "SimpleNotificationService-0000000000000000000000000000test.pem"
)
_SNS_HASHES = {"1": hashes.SHA1, "2": hashes.SHA256}


def _self_signed_certificate(key: rsa.RSAPrivateKey) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class SnsTestSigner:
    """An RSA key + self-signed certificate standing in for an SNS signing certificate."""

    private_key: rsa.RSAPrivateKey
    certificate_pem: bytes
    cert_url: str = TEST_CERT_URL

    @classmethod
    def generate(cls, cert_url: str = TEST_CERT_URL) -> SnsTestSigner:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return cls(key, _self_signed_certificate(key), cert_url)

    def certificate_store(self) -> StaticCertificateStore:
        """A store that serves this signer's certificate at ``cert_url``."""
        return StaticCertificateStore({self.cert_url: self.certificate_pem})

    def sign(self, message: dict[str, Any], version: str = "1") -> dict[str, Any]:
        """Return a copy of ``message`` with SignatureVersion/SigningCertURL/Signature set."""
        signed = {**message, "SignatureVersion": version, "SigningCertURL": self.cert_url}
        signature = self.private_key.sign(
            sns_string_to_sign(signed), padding.PKCS1v15(), _SNS_HASHES[version]()
        )
        signed["Signature"] = base64.b64encode(signature).decode("ascii")
        return signed

    def notification(
        self,
        message: str | dict[str, Any],
        *,
        topic_arn: str = TEST_TOPIC_ARN,
        subject: str | None = None,
        timestamp: datetime | None = None,
        message_id: str | None = None,
        version: str = "1",
    ) -> dict[str, Any]:
        """A signed SNS Notification; dict ``message`` is JSON-encoded like SES does."""
        body: dict[str, Any] = {
            "Type": NOTIFICATION,
            "MessageId": message_id or str(uuid.uuid4()),
            "TopicArn": topic_arn,
            "Message": message if isinstance(message, str) else json.dumps(message),
            "Timestamp": _sns_timestamp(timestamp),
            "UnsubscribeURL": f"https://sns.{TEST_REGION}.amazonaws.com/?Action=Unsubscribe",
        }
        if subject is not None:
            body["Subject"] = subject
        return self.sign(body, version)

    def subscription_confirmation(
        self, *, topic_arn: str = TEST_TOPIC_ARN, version: str = "1"
    ) -> dict[str, Any]:
        token = secrets.token_hex(32)
        body = {
            "Type": SUBSCRIPTION_CONFIRMATION,
            "MessageId": str(uuid.uuid4()),
            "Token": token,
            "TopicArn": topic_arn,
            "Message": f"You have chosen to subscribe to the topic {topic_arn}.\n"
            "To confirm the subscription, visit the SubscribeURL included in this message.",
            "SubscribeURL": f"https://sns.{TEST_REGION}.amazonaws.com/"
            f"?Action=ConfirmSubscription&TopicArn={topic_arn}&Token={token}",
            "Timestamp": _sns_timestamp(None),
        }
        return self.sign(body, version)


def _sns_timestamp(value: datetime | None) -> str:
    # SNS format: millisecond precision, "Z" suffix, e.g. 2012-05-02T00:54:06.655Z
    when = (value or datetime.now(UTC)).astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


@dataclass
class SendGridTestSigner:
    """An ECDSA P-256 key pair standing in for a SendGrid signed-webhook key."""

    private_key: ec.EllipticCurvePrivateKey

    @classmethod
    def generate(cls) -> SendGridTestSigner:
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @property
    def public_key_b64(self) -> str:
        """The verification key in SendGrid's display form (base64 DER SPKI)."""
        der = self.private_key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return base64.b64encode(der).decode("ascii")

    def sign(self, payload: bytes, timestamp: int | None = None) -> dict[str, str]:
        """Headers SendGrid would send with ``payload``."""
        ts = str(int(time.time()) if timestamp is None else timestamp)
        der = self.private_key.sign(ts.encode() + payload, ec.ECDSA(hashes.SHA256()))
        return {SIGNATURE_HEADER: base64.b64encode(der).decode("ascii"), TIMESTAMP_HEADER: ts}


def mailgun_signature(
    signing_key: str, *, timestamp: int | None = None, token: str | None = None
) -> dict[str, str]:
    """A Mailgun ``signature`` block: {"timestamp", "token", "signature"}."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    tok = token or secrets.token_hex(25)  # Mailgun tokens are 50 hex characters
    digest = hmac.new(signing_key.encode(), f"{ts}{tok}".encode(), hashlib.sha256)
    return {"timestamp": ts, "token": tok, "signature": digest.hexdigest()}


def mailgun_body(
    signing_key: str,
    event_data: dict[str, Any],
    *,
    timestamp: int | None = None,
    token: str | None = None,
) -> bytes:
    """A complete signed Mailgun webhook body, as raw bytes."""
    signature = mailgun_signature(signing_key, timestamp=timestamp, token=token)
    return json.dumps({"signature": signature, "event-data": event_data}).encode()

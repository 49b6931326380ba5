"""Signed-webhook verification for Amazon SNS/SES, SendGrid and Mailgun (no Django).

Every verifier raises :class:`WebhookVerificationError` (with a machine-readable
``reason``) on failure and returns the parsed payload on success. The tests' signing helpers
(throwaway keys signing as SNS, SendGrid and Mailgun do) live in testkit/webhook_signing.py.
"""

from .errors import Reason, WebhookVerificationError
from .mailgun import MailgunVerifier
from .replay import InMemoryReplayGuard, RedisReplayGuard, ReplayGuard
from .sendgrid import (
    SendGridVerifier,
    load_sendgrid_public_key,
    verify_sendgrid_request,
)
from .sns import SnsVerifier, sns_string_to_sign, verify_sns_message
from .sns_certs import (
    CertificateStore,
    HttpsCertificateStore,
    StaticCertificateStore,
    validate_signing_cert_url,
)

__all__ = [
    "CertificateStore",
    "HttpsCertificateStore",
    "InMemoryReplayGuard",
    "MailgunVerifier",
    "Reason",
    "RedisReplayGuard",
    "ReplayGuard",
    "SendGridVerifier",
    "SnsVerifier",
    "StaticCertificateStore",
    "WebhookVerificationError",
    "load_sendgrid_public_key",
    "sns_string_to_sign",
    "validate_signing_cert_url",
    "verify_sendgrid_request",
    "verify_sns_message",
]

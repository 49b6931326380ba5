"""Verifiers built from settings, once per process, rebuilt when a test overrides a setting.

The certificate store and the subscription confirmer are hooks (dotted paths to zero-argument
factories in settings) so tests pin certificates and record fetches instead of reaching AWS.
Both production hooks refuse any URL whose host is not an SNS endpoint (sns_certs patterns).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import cache
from typing import Protocol
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from core.redis_client import get_redis, redis_key
from feedback.verification import (
    CertificateStore,
    HttpsCertificateStore,
    MailgunVerifier,
    RedisReplayGuard,
    SendGridVerifier,
    SnsVerifier,
)
from feedback.verification.sns_certs import DEFAULT_CERT_HOST_PATTERNS

logger = logging.getLogger(__name__)


class SubscriptionConfirmer(Protocol):
    def __call__(self, url: str) -> None: ...


class WebhookNotConfiguredError(Exception):
    """The provider's key (or topic list) is not set: we cannot verify, so we refuse."""


def is_sns_url(url: str) -> bool:
    """HTTPS on port 443 to an SNS endpoint host (the same patterns as the certificate check)."""
    parts = urlsplit(url)
    if parts.scheme != "https" or parts.username or parts.password:
        return False
    try:
        if parts.port not in (None, 443):
            return False
    except ValueError:
        return False
    host = parts.hostname or ""
    return any(p.fullmatch(host) for p in DEFAULT_CERT_HOST_PATTERNS)


def https_certificate_store() -> CertificateStore:
    return HttpsCertificateStore()


def https_subscription_confirmer() -> SubscriptionConfirmer:
    def confirm(url: str) -> None:
        if not is_sns_url(url):  # never fetch a URL an attacker could point anywhere
            raise ValueError(f"SubscribeURL host not allowed: {url}")
        response = requests.get(url, timeout=5, allow_redirects=False)
        response.raise_for_status()

    return confirm


@cache
def sns_verifier() -> SnsVerifier:
    store = import_string(settings.FEEDBACK_SNS_CERTIFICATE_STORE)()
    return SnsVerifier(
        allowed_topic_arns=settings.FEEDBACK_SNS_TOPIC_ARNS,
        certificate_store=store,
        max_age=timedelta(seconds=settings.FEEDBACK_SNS_MAX_AGE_SECONDS),
    )


@cache
def sns_confirmer() -> SubscriptionConfirmer:
    return import_string(settings.FEEDBACK_SNS_CONFIRMER)()


@cache
def sendgrid_verifier() -> SendGridVerifier:
    if not settings.FEEDBACK_SENDGRID_PUBLIC_KEY:
        raise WebhookNotConfiguredError("FEEDBACK_SENDGRID_PUBLIC_KEY")
    return SendGridVerifier(
        settings.FEEDBACK_SENDGRID_PUBLIC_KEY, tolerance=settings.FEEDBACK_SENDGRID_TOLERANCE_SECONDS
    )


@cache
def mailgun_verifier() -> MailgunVerifier:
    if not settings.FEEDBACK_MAILGUN_SIGNING_KEY:
        raise WebhookNotConfiguredError("FEEDBACK_MAILGUN_SIGNING_KEY")
    # Tokens are remembered in Redis, atomically across web processes (SET NX EX).
    guard = RedisReplayGuard(get_redis(), prefix=redis_key("webhooks", "mailgun-token", ""))
    return MailgunVerifier(
        settings.FEEDBACK_MAILGUN_SIGNING_KEY,
        guard,
        tolerance=settings.FEEDBACK_MAILGUN_TOLERANCE_SECONDS,
    )


def clear_caches(**_: object) -> None:
    for factory in (sns_verifier, sns_confirmer, sendgrid_verifier, mailgun_verifier):
        factory.cache_clear()


setting_changed.connect(clear_caches, dispatch_uid="feedback-webhook-config")

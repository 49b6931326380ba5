"""Fixtures for the feedback tests: webhook keys generated per test, wired into settings."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from core.redis_client import get_redis, redis_key
from testkit.webhook_signing import TEST_TOPIC_ARN, SendGridTestSigner, SnsTestSigner
from tests.feedback import hooks


@dataclass
class WebhookKeys:
    sns: SnsTestSigner
    sendgrid: SendGridTestSigner
    mailgun_key: str


@pytest.fixture(scope="session")
def _signers() -> tuple[SnsTestSigner, SendGridTestSigner]:
    return SnsTestSigner.generate(), SendGridTestSigner.generate()


@pytest.fixture
def webhook_keys(settings, _signers) -> WebhookKeys:
    sns, sendgrid = _signers
    hooks.current_store = sns.certificate_store()
    hooks.confirmed.clear()
    settings.FEEDBACK_SNS_TOPIC_ARNS = [TEST_TOPIC_ARN]
    settings.FEEDBACK_SNS_CERTIFICATE_STORE = "tests.feedback.hooks.certificate_store"
    settings.FEEDBACK_SNS_CONFIRMER = "tests.feedback.hooks.confirmer"
    settings.FEEDBACK_SENDGRID_PUBLIC_KEY = sendgrid.public_key_b64
    settings.FEEDBACK_MAILGUN_SIGNING_KEY = "key-test-" + sns.cert_url[-12:]
    return WebhookKeys(sns, sendgrid, settings.FEEDBACK_MAILGUN_SIGNING_KEY)


@pytest.fixture(autouse=True)
def _clean_feedback_redis() -> None:
    """Forget replay tokens and reputation throttles of earlier tests (this Redis DB only)."""
    client = get_redis()
    for key in client.scan_iter(redis_key("*"), count=1000):
        if b":webhooks:" in key or b":feedback:" in key:
            client.delete(key)

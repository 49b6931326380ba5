"""Mailgun, all in this package: sending (provider.py, the Messages API's batch sending), our
message id as a `v:` variable (base.MESSAGE_ID_KEY), and its JSON webhooks (signature.py
verifies, webhook.py builds the verifier and its replay guard from settings and normalises the
events).

Only `ESP` is defined here; its callables import the modules (see ses/__init__.py).
"""

from __future__ import annotations

from django.conf import settings

from delivery.providers.base import Esp, Provider
from delivery.providers.webhooks import EspWebhook


def build_provider() -> Provider:
    from delivery.providers.http import http_settings
    from delivery.providers.mailgun.provider import MailgunProvider

    return MailgunProvider(
        http_settings(
            settings.MAILGUN_API_KEY, settings.MAILGUN_API_URL, settings.MAILGUN_MAX_REQUEST_BYTES,
            settings.MAILGUN_DOMAIN,
        )
    )


def webhook() -> EspWebhook:
    from delivery.providers.mailgun.webhook import WEBHOOK

    return WEBHOOK


ESP = Esp(name="mailgun", build_provider=build_provider, webhook=webhook)

"""Mailgun, all in this package: sending (provider.py, the Messages API's batch sending), our
message id as a `v:` variable (base.MESSAGE_ID_KEY), and its JSON webhooks (signature.py
verifies, webhook.py builds the verifier and its replay guard from settings and normalises the
events).

Only `ESP` is defined here; it imports the modules when asked (see ses/__init__.py).
"""

from __future__ import annotations

from django.conf import settings

from delivery.providers.base import Esp, Provider


def build_provider() -> Provider:
    from delivery.providers.http import http_settings
    from delivery.providers.mailgun.provider import MailgunProvider

    return MailgunProvider(
        http_settings(
            settings.MAILGUN_API_KEY, settings.MAILGUN_API_URL, settings.MAILGUN_MAX_REQUEST_BYTES,
            settings.MAILGUN_DOMAIN,
        )
    )


ESP = Esp(name="mailgun", build_provider=build_provider, webhook_module="delivery.providers.mailgun.webhook")

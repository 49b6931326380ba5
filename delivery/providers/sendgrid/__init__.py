"""SendGrid, all in this package: sending (provider.py, v3 Mail Send), our message id as a custom
arg (base.MESSAGE_ID_KEY), and its Signed Event Webhook (signature.py verifies, webhook.py builds
the verifier from settings and normalises the events).

Only `ESP` is defined here; it imports the modules when asked (see ses/__init__.py).
"""

from __future__ import annotations

from django.conf import settings

from delivery.providers.base import Esp, Provider


def build_provider() -> Provider:
    from delivery.providers.http import http_settings
    from delivery.providers.sendgrid.provider import SendGridProvider

    return SendGridProvider(
        http_settings(
            settings.SENDGRID_API_KEY, settings.SENDGRID_API_URL, settings.SENDGRID_MAX_REQUEST_BYTES
        )
    )


ESP = Esp(name="sendgrid", build_provider=build_provider,
          webhook_module="delivery.providers.sendgrid.webhook")

"""Amazon SES, all in this package: sending (provider.py, API v2 through boto3), our message id as
a message tag (base.MESSAGE_ID_KEY), and its events through SNS (sns.py and sns_certs.py verify
the signature, webhook.py builds the verifier from settings and normalises the events).

Only `ESP` is defined here; it imports the modules when asked, so importing the registry imports
neither boto3 nor the verifiers' crypto.
"""

from __future__ import annotations

from django.conf import settings

from delivery.providers.base import Esp, Provider


def build_provider() -> Provider:
    from delivery.providers.ses.provider import SesProvider, SesSettings

    return SesProvider(
        SesSettings(
            region=settings.AWS_REGION,
            access_key_id=settings.AWS_ACCESS_KEY_ID,
            secret_access_key=settings.AWS_SECRET_ACCESS_KEY,
            endpoint_url=settings.SES_ENDPOINT_URL,
            connect_timeout=settings.ESP_CONNECT_TIMEOUT_SECONDS,
            read_timeout=settings.ESP_READ_TIMEOUT_SECONDS,
            pool_size=settings.ESP_POOL_SIZE,
        )
    )


ESP = Esp(name="ses", build_provider=build_provider, webhook_module="delivery.providers.ses.webhook")

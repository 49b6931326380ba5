"""Providers: one module per ESP behind the contract in base.py.

`get_provider(name)` returns this process's instance (built once, so connections are reused).
Only modules in this package import boto3 or requests.
"""

from __future__ import annotations

from functools import cache

from django.conf import settings

from delivery.providers.base import Provider


def _http_settings(api_key: str, base_url: str, max_request_bytes: int, domain: str = ""):
    from delivery.providers.http import HttpSettings

    return HttpSettings(
        api_key=api_key,
        base_url=base_url,
        connect_timeout=settings.ESP_CONNECT_TIMEOUT_SECONDS,
        read_timeout=settings.ESP_READ_TIMEOUT_SECONDS,
        pool_size=settings.ESP_POOL_SIZE,
        domain=domain,
        max_request_bytes=max_request_bytes,
    )


def _build_smtp() -> Provider:
    from delivery.providers.smtp import SmtpProvider, SmtpSettings

    return SmtpProvider(
        SmtpSettings(
            host=settings.SMTP_HOST,
            port=settings.SMTP_PORT,
            user=settings.SMTP_USER,
            password=settings.SMTP_PASSWORD,
            starttls=settings.SMTP_STARTTLS,
            timeout_seconds=settings.SMTP_TIMEOUT_SECONDS,
        )
    )


def _build_ses() -> Provider:
    from delivery.providers.ses import SesProvider, SesSettings

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


def _build_sendgrid() -> Provider:
    from delivery.providers.sendgrid import SendGridProvider

    return SendGridProvider(
        _http_settings(
            settings.SENDGRID_API_KEY, settings.SENDGRID_API_URL, settings.SENDGRID_MAX_REQUEST_BYTES
        )
    )


def _build_mailgun() -> Provider:
    from delivery.providers.mailgun import MailgunProvider

    return MailgunProvider(
        _http_settings(
            settings.MAILGUN_API_KEY, settings.MAILGUN_API_URL, settings.MAILGUN_MAX_REQUEST_BYTES,
            settings.MAILGUN_DOMAIN,
        )
    )


_BUILDERS = {"smtp": _build_smtp, "ses": _build_ses, "sendgrid": _build_sendgrid, "mailgun": _build_mailgun}


@cache
def get_provider(name: str) -> Provider:
    try:
        return _BUILDERS[name]()
    except KeyError:
        raise ValueError(f"unknown provider {name!r} in NOTIFIER_PROVIDERS") from None


def provider_order() -> list[str]:
    """Failover order, from NOTIFIER_PROVIDERS."""
    return list(settings.NOTIFIER_PROVIDERS)

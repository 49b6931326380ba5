"""Providers: one module per ESP behind the contract in base.py.

`get_provider(name)` returns this thread's instance (built once per thread, so connections are
reused): a provider holds a live connection (an SMTP session, an HTTP pool) that two threads of a
`threads` pool must never interleave on. A prefork child has one thread, so one instance.
Only modules in this package import boto3 or requests.
"""

from __future__ import annotations

import threading

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


class _PerThreadProviders:
    """Providers built once per thread; `cache_clear()` makes every thread build anew (settings
    changed), as functools.cache's did for the one process-wide instance."""

    def __init__(self) -> None:
        self._local = threading.local()  # .built: (the generation it was built in, name -> provider)
        self._generation = 0

    def __call__(self, name: str) -> Provider:
        generation, built = getattr(self._local, "built", (None, {}))
        if generation != self._generation:
            built = {}
            self._local.built = (self._generation, built)
        provider = built.get(name)
        if provider is None:
            try:
                builder = _BUILDERS[name]
            except KeyError:
                raise ValueError(f"unknown provider {name!r} in NOTIFIER_PROVIDERS") from None
            provider = built[name] = builder()
        return provider

    def cache_clear(self) -> None:
        self._generation += 1


get_provider = _PerThreadProviders()


def provider_order() -> list[str]:
    """Failover order, from NOTIFIER_PROVIDERS."""
    return list(settings.NOTIFIER_PROVIDERS)

"""Providers: one module per ESP behind the contract in base.py.

`get_provider(name)` returns this process's instance (built once, so connections are reused).
"""

from __future__ import annotations

from functools import cache

from django.conf import settings

from delivery.providers.base import Provider


def _build(name: str) -> Provider:
    if name == "smtp":
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
    raise ValueError(f"unknown provider {name!r} in NOTIFIER_PROVIDERS")


@cache
def get_provider(name: str) -> Provider:
    return _build(name)


def provider_order() -> list[str]:
    """Failover order, from NOTIFIER_PROVIDERS."""
    return list(settings.NOTIFIER_PROVIDERS)

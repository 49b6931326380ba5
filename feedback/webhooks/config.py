"""Each ESP's webhook verifier (and SNS's subscription confirmer), built from settings once per
process and rebuilt when a test overrides a setting.

What to build is the ESP's own knowledge (`delivery/providers/<esp>/webhook.py`); this only keeps
one per process, looked up by the ESP's name in the registry.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from django.core.signals import setting_changed

from delivery.providers import esps_with_webhooks
from delivery.providers.webhooks import EspWebhook, RequestVerifier


def esp_webhook(name: str) -> EspWebhook | None:
    """The webhook of the ESP named `name`, or None when there is no such ESP or it has none."""
    esp = esps_with_webhooks().get(name)
    return esp.webhook() if esp is not None else None


@cache
def verifier(name: str) -> RequestVerifier:
    """Raises WebhookNotConfiguredError (not cached) while the ESP's key is unset."""
    return esp_webhook(name).verifier()


@cache
def subscription_confirmer(name: str) -> Callable[[str], None]:
    return esp_webhook(name).handshake.confirmer()


def clear_caches(**_: object) -> None:
    for factory in (verifier, subscription_confirmer):
        factory.cache_clear()


setting_changed.connect(clear_caches, dispatch_uid="feedback-webhook-config")

"""What feedback needs to take one ESP's event webhook, and the plumbing the verifiers share.

Each ESP package with a webhook (`delivery/providers/<esp>/webhook.py`) offers one `EspWebhook`:
how to build its verifier from settings, what a verified payload is (events, or a subscription
handshake), how to undo what verifying recorded when the request could not be stored, and how
its events become `NormalizedEvent`s. feedback looks the ESP up by name in the registry
(`delivery/providers/__init__.py` `ESPS`) and runs the same steps for every ESP: verify, store,
answer, normalise. Verifiers raise `WebhookVerificationError` (errors.py) with a `Reason`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from delivery.providers.events import NormalizedEvent
from delivery.providers.webhooks.errors import Reason, WebhookVerificationError

# What a stored webhook delivery is (WebhookDelivery.kind); only notifications carry events.
NOTIFICATION = "notification"
SUBSCRIPTION_CONFIRMATION = "subscription_confirmation"
UNSUBSCRIBE_CONFIRMATION = "unsubscribe_confirmation"


class WebhookNotConfiguredError(Exception):
    """The ESP's key (or topic list) is not set: we cannot verify, so we refuse."""


class RequestVerifier(Protocol):
    def verify_request(self, body: bytes, headers: Mapping[str, str]) -> Any:
        """The verified, parsed payload; raises WebhookVerificationError."""


@dataclass(frozen=True)
class SubscriptionHandshake:
    """An ESP that asks the receiver to confirm a subscription by fetching a URL it sends (SNS)."""

    # The URL to fetch, or None when it does not point at the ESP (never fetched then).
    confirmation_url: Callable[[Any], str | None]
    # From settings: a callable that fetches the URL (tests record instead).
    confirmer: Callable[[], Callable[[str], None]]


def _always_notification(_payload: Any) -> str:
    return NOTIFICATION


def _nothing_to_undo(_payload: Any) -> None:
    return None


@dataclass(frozen=True)
class EspWebhook:
    """One ESP's event webhook, served at /webhooks/<name>/."""

    # Built from settings once per process; raises WebhookNotConfiguredError when its key is unset.
    verifier: Callable[[], RequestVerifier]
    # A verified payload (one stored delivery's JSON) -> its events; raises NormalizationError.
    normalize: Callable[[Any], list[NormalizedEvent]]
    # What a verified payload is: NOTIFICATION, SUBSCRIPTION_CONFIRMATION or UNSUBSCRIBE_CONFIRMATION.
    kind: Callable[[Any], str] = _always_notification
    handshake: SubscriptionHandshake | None = None
    # Called when a verified request could not be stored: forget what verifying recorded (a
    # replay token), so the ESP's retry of the same request is not refused as a replay.
    on_store_failure: Callable[[Any], None] = _nothing_to_undo


__all__ = [
    "NOTIFICATION",
    "SUBSCRIPTION_CONFIRMATION",
    "UNSUBSCRIBE_CONFIRMATION",
    "EspWebhook",
    "Reason",
    "RequestVerifier",
    "SubscriptionHandshake",
    "WebhookNotConfiguredError",
    "WebhookVerificationError",
]

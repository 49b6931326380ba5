"""Turn a stored webhook delivery's payload into provider-neutral `NormalizedEvent`s.

Each ESP normalises its own payloads (`delivery/providers/<esp>/webhook.py`, with its send code
and its signature check); this looks the ESP up by name in the registry. The event record and
its types are defined in `delivery/providers/events.py` and re-exported here for feedback's
models and services.
"""

from __future__ import annotations

from typing import Any

from delivery.providers import esps_with_webhooks
from delivery.providers.events import (
    BounceType,
    DropReason,
    EventType,
    NormalizationError,
    NormalizedEvent,
)

__all__ = ["BounceType", "DropReason", "EventType", "NormalizationError", "NormalizedEvent", "normalize"]


def normalize(provider: str, payload: Any) -> list[NormalizedEvent]:
    """The events of one verified payload from the ESP named `provider`."""
    esp = esps_with_webhooks().get(provider)
    if esp is None:
        raise NormalizationError(f"unknown provider {provider!r}")
    return esp.webhook().normalize(payload)

"""SendGrid's Signed Event Webhook: its verifier from settings and its events normalised.

Payload: "Event Webhook Reference", a JSON array of events with our custom_args merged into
each event's top level (so `MESSAGE_ID_KEY` is a top-level key). Events of types we do not track
(e.g. `group_resubscribe`) are skipped; a structurally broken event raises NormalizationError.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings

from delivery.providers.base import MESSAGE_ID_KEY
from delivery.providers.events import (
    BounceType,
    DropReason,
    EventType,
    NormalizedEvent,
    epoch_time,
    our_id,
    require,
)
from delivery.providers.sendgrid.signature import SendGridVerifier
from delivery.providers.webhooks import EspWebhook, WebhookNotConfiguredError

_TYPES: dict[str, EventType] = {
    "processed": EventType.SENT,
    "delivered": EventType.DELIVERED,
    "deferred": EventType.DEFERRED,
    "bounce": EventType.BOUNCED,
    "dropped": EventType.DROPPED,
    "open": EventType.OPENED,
    "click": EventType.CLICKED,
    "spamreport": EventType.COMPLAINED,
    "unsubscribe": EventType.UNSUBSCRIBED,
    "group_unsubscribe": EventType.UNSUBSCRIBED,
}
# `dropped` reasons naming one of SendGrid's suppression lists ("Drops" in SendGrid's docs);
# "Invalid", "Spam Content", "Invalid SMTPAPI header", ... say nothing about the person.
_DROP_REASONS: dict[str, DropReason] = {
    "Bounced Address": "bounce",
    "Unsubscribed Address": "unsubscribe",
    "Spam Reporting Address": "complaint",
}


def normalize_sendgrid(events: Iterable[dict[str, Any]]) -> list[NormalizedEvent]:
    """Normalise a verified SendGrid event batch (the JSON array)."""
    normalized = []
    for event in events:
        event_type = _TYPES.get(str(event.get("event")))
        if event_type is not None:
            normalized.append(_event(event, event_type))
    return normalized


def _event(event: dict[str, Any], event_type: EventType) -> NormalizedEvent:
    return NormalizedEvent(
        provider="sendgrid",
        event_type=event_type,
        recipient=require(event, "email"),
        occurred_at=epoch_time(require(event, "timestamp")),
        provider_message_id=_message_id(event.get("sg_message_id")),
        notifier_message_id=our_id(event.get(MESSAGE_ID_KEY)),  # custom_args merged in
        provider_event_id=require(event, "sg_event_id"),
        raw=event,
        bounce_type=_bounce_type(event) if event_type is EventType.BOUNCED else None,
        url=event.get("url") if event_type is EventType.CLICKED else None,
        drop_reason=_DROP_REASONS.get(str(event.get("reason")))
        if event_type is EventType.DROPPED else None,
    )


def _bounce_type(event: dict[str, Any]) -> BounceType:
    # bounce events carry type "bounce" (permanent) or "blocked" (receiver refused this
    # time, e.g. reputation/content; SendGrid does not suppress the address for it).
    return "soft" if event.get("type") == "blocked" else "hard"


def _message_id(value: Any) -> str | None:
    # sg_message_id is "<X-Message-Id>.filterNNNN...": the prefix is the id returned by
    # POST /v3/mail/send in the X-Message-Id header, which is what the sender stores.
    if not isinstance(value, str) or not value:
        return None
    return value.split(".filter", 1)[0]


def verifier_from_settings() -> SendGridVerifier:
    if not settings.FEEDBACK_SENDGRID_PUBLIC_KEY:
        raise WebhookNotConfiguredError("FEEDBACK_SENDGRID_PUBLIC_KEY")
    return SendGridVerifier(
        settings.FEEDBACK_SENDGRID_PUBLIC_KEY, tolerance=settings.FEEDBACK_SENDGRID_TOLERANCE_SECONDS
    )


WEBHOOK = EspWebhook(verifier=verifier_from_settings, normalize=normalize_sendgrid)

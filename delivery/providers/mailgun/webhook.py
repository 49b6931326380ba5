"""Mailgun's JSON webhooks: its verifier from settings (with the Redis replay guard) and its
events normalised.

Payload: the "Webhooks" / "Events" docs, one `event-data` object per request, our `v:` variables
in its `user-variables`; `failed` carries a `severity`. Events of types we do not track (e.g.
`stored`) are skipped; a structurally broken payload raises NormalizationError.
"""

from __future__ import annotations

from email.utils import parseaddr
from typing import Any

from django.conf import settings

from core.redis_client import get_redis, redis_key
from delivery.providers.base import MESSAGE_ID_KEY
from delivery.providers.events import (
    BounceType,
    DropReason,
    EventType,
    NormalizationError,
    NormalizedEvent,
    as_dict,
    epoch_time,
    our_id,
    require,
)
from delivery.providers.mailgun.signature import MailgunVerifier
from delivery.providers.webhooks import EspWebhook, WebhookNotConfiguredError
from delivery.providers.webhooks.replay import RedisReplayGuard

_TYPES: dict[str, EventType] = {
    "accepted": EventType.SENT,
    "delivered": EventType.DELIVERED,
    "failed": EventType.BOUNCED,  # refined by severity/reason below
    "rejected": EventType.DROPPED,
    "opened": EventType.OPENED,
    "clicked": EventType.CLICKED,
    "complained": EventType.COMPLAINED,
    "unsubscribed": EventType.UNSUBSCRIBED,
}
# Permanent failures where Mailgun never attempted delivery because the address is on one
# of its suppression lists: a drop, not a fresh bounce. (`rejected` events say why in free
# text, e.g. "Sandbox subdomains are for test purposes only.": no list named, no reason.)
_SUPPRESSED: dict[str, DropReason] = {
    "suppress-bounce": "bounce",
    "suppress-unsubscribe": "unsubscribe",
    "suppress-complaint": "complaint",
}


def normalize_mailgun(payload: dict[str, Any]) -> list[NormalizedEvent]:
    """Normalise a verified Mailgun webhook payload (exactly one event)."""
    data = as_dict(payload.get("event-data"))
    event_type = _TYPES.get(str(data.get("event")))
    if event_type is None:
        return []
    bounce_type: BounceType | None = None
    if data.get("event") == "failed":
        event_type, bounce_type = _failure(data)
    drop_reason: DropReason | None = None
    if event_type is EventType.DROPPED:
        drop_reason = _SUPPRESSED.get(str(data.get("reason")))
    return [
        NormalizedEvent(
            provider="mailgun",
            event_type=event_type,
            recipient=_recipient(data),
            occurred_at=epoch_time(require(data, "timestamp")),
            provider_message_id=_message_id(data),
            notifier_message_id=our_id(as_dict(data.get("user-variables")).get(MESSAGE_ID_KEY)),
            # Mailgun documents event ids as unique only within a day; receivers that keep
            # idempotency keys longer should scope them by occurred_at date.
            provider_event_id=require(data, "id"),
            raw=payload,
            bounce_type=bounce_type,
            url=data.get("url") if event_type is EventType.CLICKED else None,
            drop_reason=drop_reason,
        )
    ]


def _failure(data: dict[str, Any]) -> tuple[EventType, BounceType | None]:
    # severity "temporary": Mailgun will retry, so this is a deferral, not a bounce (a
    # later "failed"/"permanent" follows if retries run out). "permanent" with reason
    # "old" means retries were exhausted after temporary failures: a soft bounce.
    if data.get("severity") == "temporary":
        return EventType.DEFERRED, None
    reason = data.get("reason")
    if reason in _SUPPRESSED:
        return EventType.DROPPED, None
    return EventType.BOUNCED, "soft" if reason == "old" else "hard"


def _recipient(data: dict[str, Any]) -> str:
    recipient = data.get("recipient")
    if isinstance(recipient, str) and recipient:
        return recipient
    # "rejected" events may omit recipient; fall back to the To header (as anymail does).
    to_header = as_dict(as_dict(data.get("message")).get("headers")).get("to")
    address = parseaddr(to_header)[1] if isinstance(to_header, str) else ""
    if not address:
        raise NormalizationError("Mailgun event has no recipient")
    return address


def _message_id(data: dict[str, Any]) -> str | None:
    # Events carry message-id without angle brackets, but the send API returns
    # "<id@domain>"; strip them so both sides compare equal.
    value = as_dict(as_dict(data.get("message")).get("headers")).get("message-id")
    return value.strip().strip("<>") if isinstance(value, str) and value else None


def _token_key(token: str) -> str:
    return redis_key("webhooks", "mailgun-token", token)


def verifier_from_settings() -> MailgunVerifier:
    if not settings.FEEDBACK_MAILGUN_SIGNING_KEY:
        raise WebhookNotConfiguredError("FEEDBACK_MAILGUN_SIGNING_KEY")
    # Tokens are remembered in Redis, atomically across web processes (SET NX EX).
    guard = RedisReplayGuard(get_redis(), prefix=_token_key(""))
    return MailgunVerifier(
        settings.FEEDBACK_MAILGUN_SIGNING_KEY,
        guard,
        tolerance=settings.FEEDBACK_MAILGUN_TOLERANCE_SECONDS,
    )


def forget_token(payload: dict[str, Any]) -> None:
    """The guard recorded the token; if we could not store the event, Mailgun's retry carries
    the same token and must not be refused as a replay."""
    get_redis().delete(_token_key(payload["signature"]["token"]))


WEBHOOK = EspWebhook(verifier=verifier_from_settings, normalize=normalize_mailgun,
                     on_store_failure=forget_token)

"""Turn verified ESP webhook payloads into provider-neutral :class:`NormalizedEvent` lists.

Input is what the verifiers return (SNS message dict, SendGrid event list, Mailgun
payload dict). Events of types we do not track (e.g. SendGrid ``group_resubscribe``,
Mailgun ``stored``) are skipped; structurally broken payloads raise
:class:`NormalizationError`.

Payload references:
  SES:      "Contents of event data that Amazon SES publishes to Amazon SNS" (event
            publishing, key ``eventType``) and "Amazon SNS notification contents for
            Amazon SES" (key ``notificationType``); the shapes otherwise match.
  SendGrid: "Event Webhook Reference" (JSON array; custom_args merged into each event).
  Mailgun:  "Webhooks" / "Events" docs (``event-data`` object; ``failed`` has ``severity``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parseaddr
from typing import Any, Literal

from django.db import models

OUR_ID_KEY = "notifier_message_id"

Provider = Literal["ses", "sendgrid", "mailgun"]
BounceType = Literal["hard", "soft"]
# Why an ESP dropped a message without trying: the address is on its bounce, unsubscribe or
# spam-report list. Other drop reasons (invalid address, sandbox, virus, ...) carry none.
DropReason = Literal["bounce", "unsubscribe", "complaint"]


class EventType(models.TextChoices):
    """The one list of event types: EmailEvent.event_type takes its choices from it."""

    SENT = "sent"
    DELIVERED = "delivered"
    DEFERRED = "deferred"
    BOUNCED = "bounced"
    DROPPED = "dropped"  # rejected/dropped by the ESP before any delivery attempt
    OPENED = "opened"
    CLICKED = "clicked"
    COMPLAINED = "complained"
    UNSUBSCRIBED = "unsubscribed"


class NormalizationError(ValueError):
    """A verified payload did not have the documented shape."""


@dataclass(frozen=True, slots=True)
class NormalizedEvent:
    provider: Provider
    event_type: EventType
    recipient: str
    occurred_at: datetime  # always timezone-aware (UTC)
    provider_message_id: str | None
    notifier_message_id: str | None  # our Message id, echoed back via tags/custom args
    provider_event_id: str  # idempotency key, unique per provider
    raw: dict[str, Any] = field(repr=False)
    bounce_type: BounceType | None = None  # set only when event_type is BOUNCED
    url: str | None = None  # set only when event_type is CLICKED
    drop_reason: DropReason | None = None  # set only when event_type is DROPPED


def normalize(provider: Provider, payload: Any) -> list[NormalizedEvent]:
    """Dispatch on provider name to the matching ``normalize_*`` function."""
    handlers: dict[str, Callable[[Any], list[NormalizedEvent]]] = {
        "ses": normalize_ses,
        "sendgrid": normalize_sendgrid,
        "mailgun": normalize_mailgun,
    }
    try:
        handler = handlers[provider]
    except KeyError:
        raise NormalizationError(f"unknown provider {provider!r}") from None
    return handler(payload)


# ------------------------------------------------------------------------------ SES

_SES_TYPES: dict[str, EventType] = {
    "Send": EventType.SENT,
    "Delivery": EventType.DELIVERED,
    "DeliveryDelay": EventType.DEFERRED,
    "Bounce": EventType.BOUNCED,
    "Complaint": EventType.COMPLAINED,
    "Reject": EventType.DROPPED,
    "Rendering Failure": EventType.DROPPED,
    "Open": EventType.OPENED,
    "Click": EventType.CLICKED,
    "Subscription": EventType.UNSUBSCRIBED,
}
# SES bounceType: Permanent = hard; Transient = soft; Undetermined ("SES was unable to
# determine a specific bounce reason") is treated as soft so we never suppress on it.
_SES_BOUNCE_TYPES: dict[str, BounceType] = {"Permanent": "hard", "Transient": "soft"}
# Sent by SES once, right after the SNS subscription is set up; not JSON, not an event.
_SES_TOPIC_VALIDATION = "Successfully validated SNS topic for Amazon SES event publishing."


def normalize_ses(sns_message: dict[str, Any]) -> list[NormalizedEvent]:
    """Normalise a verified SNS message carrying an SES event (one event per recipient)."""
    if sns_message.get("Type") != "Notification":
        return []  # Subscription/UnsubscribeConfirmation carry no mail events
    body = sns_message.get("Message")
    if body == _SES_TOPIC_VALIDATION:
        return []
    ses_event = _json_object(body)
    kind = ses_event.get("eventType") or ses_event.get("notificationType")
    event_type = _SES_TYPES.get(kind) if isinstance(kind, str) else None
    if event_type is None or not _ses_is_tracked(ses_event, kind):
        return []
    detail = _ses_detail(ses_event, kind)
    mail = _dict(ses_event.get("mail"))
    occurred_at = _ses_time(detail, mail, sns_message)
    return [
        NormalizedEvent(
            provider="ses",
            event_type=event_type,
            recipient=recipient,
            occurred_at=occurred_at,
            provider_message_id=mail.get("messageId"),
            notifier_message_id=_ses_our_id(mail),
            # One SNS message fans out to several recipients; MessageId alone collides.
            provider_event_id=f"{_require(sns_message, 'MessageId')}:{recipient}",
            raw=ses_event,
            bounce_type=_SES_BOUNCE_TYPES.get(detail.get("bounceType"), "soft")
            if event_type is EventType.BOUNCED else None,
            url=detail.get("link") if event_type is EventType.CLICKED else None,
        )
        for recipient in _ses_recipients(kind, detail, mail)
    ]


def _ses_detail(ses_event: dict[str, Any], kind: str) -> dict[str, Any]:
    # Detail object is the lower-camel event name ("bounce", "deliveryDelay"), except
    # "Rendering Failure", whose detail lives under "failure".
    key = "failure" if kind == "Rendering Failure" else kind[0].lower() + kind[1:]
    return _dict(ses_event.get(key))


def _ses_is_tracked(ses_event: dict[str, Any], kind: str) -> bool:
    # "Subscription" events fire on any preference change; only opt-outs are tracked.
    if kind != "Subscription":
        return True
    prefs = _dict(_dict(ses_event.get("subscription")).get("newTopicPreferences"))
    topics = prefs.get("topicSubscriptionStatus") or []
    opted_out = any(_dict(t).get("subscriptionStatus") == "OptOut" for t in topics)
    return bool(prefs.get("unsubscribeAll")) or opted_out


def _ses_recipients(kind: str, detail: dict[str, Any], mail: dict[str, Any]) -> list[str]:
    # Bounce/Complaint/DeliveryDelay name the affected recipients; Delivery lists plain
    # addresses; Open/Click/Send/Reject don't say which recipient, so use all of them.
    listed = {
        "Bounce": "bouncedRecipients",
        "Complaint": "complainedRecipients",
        "DeliveryDelay": "delayedRecipients",
    }
    if kind in listed:
        entries = detail.get(listed[kind]) or []
        return [_require(_dict(e), "emailAddress") for e in entries]
    if kind == "Delivery" and detail.get("recipients"):
        return [str(r) for r in detail["recipients"]]
    return [str(r) for r in mail.get("destination") or []]


def _ses_our_id(mail: dict[str, Any]) -> str | None:
    # Event publishing copies message tags into mail.tags as {name: [value, ...]};
    # the older notification format has no tags at all.
    values = _dict(mail.get("tags")).get(OUR_ID_KEY)
    return str(values[0]) if isinstance(values, list) and values else None


def _ses_time(
    detail: dict[str, Any], mail: dict[str, Any], sns_message: dict[str, Any]
) -> datetime:
    for candidate in (detail.get("timestamp"), mail.get("timestamp"), sns_message["Timestamp"]):
        if isinstance(candidate, str):
            return _iso(candidate)
    raise NormalizationError("SES event has no timestamp")


# ------------------------------------------------------------------------------ SendGrid

_SENDGRID_TYPES: dict[str, EventType] = {
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
_SENDGRID_DROP_REASONS: dict[str, DropReason] = {
    "Bounced Address": "bounce",
    "Unsubscribed Address": "unsubscribe",
    "Spam Reporting Address": "complaint",
}


def normalize_sendgrid(events: Iterable[dict[str, Any]]) -> list[NormalizedEvent]:
    """Normalise a verified SendGrid event batch (the JSON array)."""
    normalized = []
    for event in events:
        event_type = _SENDGRID_TYPES.get(str(event.get("event")))
        if event_type is not None:
            normalized.append(_sendgrid_event(event, event_type))
    return normalized


def _sendgrid_event(event: dict[str, Any], event_type: EventType) -> NormalizedEvent:
    our_id = event.get(OUR_ID_KEY)  # custom_args are merged into the event's top level
    return NormalizedEvent(
        provider="sendgrid",
        event_type=event_type,
        recipient=_require(event, "email"),
        occurred_at=_epoch(_require(event, "timestamp")),
        provider_message_id=_sendgrid_message_id(event.get("sg_message_id")),
        notifier_message_id=str(our_id) if our_id is not None else None,
        provider_event_id=_require(event, "sg_event_id"),
        raw=event,
        bounce_type=_sendgrid_bounce_type(event) if event_type is EventType.BOUNCED else None,
        url=event.get("url") if event_type is EventType.CLICKED else None,
        drop_reason=_SENDGRID_DROP_REASONS.get(str(event.get("reason")))
        if event_type is EventType.DROPPED else None,
    )


def _sendgrid_bounce_type(event: dict[str, Any]) -> BounceType:
    # bounce events carry type "bounce" (permanent) or "blocked" (receiver refused this
    # time, e.g. reputation/content; SendGrid does not suppress the address for it).
    return "soft" if event.get("type") == "blocked" else "hard"


def _sendgrid_message_id(value: Any) -> str | None:
    # sg_message_id is "<X-Message-Id>.filterNNNN...": the prefix is the id returned by
    # POST /v3/mail/send in the X-Message-Id header, which is what the sender stores.
    if not isinstance(value, str) or not value:
        return None
    return value.split(".filter", 1)[0]


# ------------------------------------------------------------------------------ Mailgun

_MAILGUN_TYPES: dict[str, EventType] = {
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
_MAILGUN_SUPPRESSED: dict[str, DropReason] = {
    "suppress-bounce": "bounce",
    "suppress-unsubscribe": "unsubscribe",
    "suppress-complaint": "complaint",
}


def normalize_mailgun(payload: dict[str, Any]) -> list[NormalizedEvent]:
    """Normalise a verified Mailgun webhook payload (exactly one event)."""
    data = _dict(payload.get("event-data"))
    event_type = _MAILGUN_TYPES.get(str(data.get("event")))
    if event_type is None:
        return []
    bounce_type: BounceType | None = None
    if data.get("event") == "failed":
        event_type, bounce_type = _mailgun_failure(data)
    drop_reason: DropReason | None = None
    if event_type is EventType.DROPPED:
        drop_reason = _MAILGUN_SUPPRESSED.get(str(data.get("reason")))
    our_id = _dict(data.get("user-variables")).get(OUR_ID_KEY)
    return [
        NormalizedEvent(
            provider="mailgun",
            event_type=event_type,
            recipient=_mailgun_recipient(data),
            occurred_at=_epoch(_require(data, "timestamp")),
            provider_message_id=_mailgun_message_id(data),
            notifier_message_id=str(our_id) if our_id is not None else None,
            # Mailgun documents event ids as unique only within a day; receivers that keep
            # idempotency keys longer should scope them by occurred_at date.
            provider_event_id=_require(data, "id"),
            raw=payload,
            bounce_type=bounce_type,
            url=data.get("url") if event_type is EventType.CLICKED else None,
            drop_reason=drop_reason,
        )
    ]


def _mailgun_failure(data: dict[str, Any]) -> tuple[EventType, BounceType | None]:
    # severity "temporary": Mailgun will retry, so this is a deferral, not a bounce (a
    # later "failed"/"permanent" follows if retries run out). "permanent" with reason
    # "old" means retries were exhausted after temporary failures: a soft bounce.
    if data.get("severity") == "temporary":
        return EventType.DEFERRED, None
    reason = data.get("reason")
    if reason in _MAILGUN_SUPPRESSED:
        return EventType.DROPPED, None
    return EventType.BOUNCED, "soft" if reason == "old" else "hard"


def _mailgun_recipient(data: dict[str, Any]) -> str:
    recipient = data.get("recipient")
    if isinstance(recipient, str) and recipient:
        return recipient
    # "rejected" events may omit recipient; fall back to the To header (as anymail does).
    to_header = _dict(_dict(data.get("message")).get("headers")).get("to")
    address = parseaddr(to_header)[1] if isinstance(to_header, str) else ""
    if not address:
        raise NormalizationError("Mailgun event has no recipient")
    return address


def _mailgun_message_id(data: dict[str, Any]) -> str | None:
    # Events carry message-id without angle brackets, but the send API returns
    # "<id@domain>"; strip them so both sides compare equal.
    value = _dict(_dict(data.get("message")).get("headers")).get("message-id")
    return value.strip().strip("<>") if isinstance(value, str) and value else None


# ------------------------------------------------------------------------------ helpers


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _json_object(value: Any) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError) as err:
        raise NormalizationError("SNS Message is not JSON") from err
    if not isinstance(parsed, dict):
        raise NormalizationError("SNS Message is not a JSON object")
    return parsed


def _require(mapping: dict[str, Any], key: str) -> Any:
    value = mapping.get(key)
    if value is None or value == "":
        raise NormalizationError(f"missing {key!r}")
    return value


def _iso(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as err:
        raise NormalizationError(f"bad timestamp {value!r}") from err
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _epoch(value: Any) -> datetime:
    # SendGrid: integer seconds; Mailgun: float seconds with microseconds.
    try:
        return datetime.fromtimestamp(float(value), UTC)
    except (TypeError, ValueError, OverflowError) as err:
        raise NormalizationError(f"bad timestamp {value!r}") from err

"""SES events through SNS: the SNS verifier from settings, the subscription handshake and the
events normalised.

Payload: "Contents of event data that Amazon SES publishes to Amazon SNS" (event publishing, key
`eventType`) and "Amazon SNS notification contents for Amazon SES" (key `notificationType`); the
shapes otherwise match. Our id comes back in `mail.tags` (a message tag, set by provider.py).

The certificate store and the subscription confirmer are hooks (dotted paths to zero-argument
factories in settings) so tests pin certificates and record fetches instead of reaching AWS.
Both production hooks refuse any URL whose host is not an SNS endpoint (sns_certs patterns).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.utils.module_loading import import_string

from delivery.providers import webhooks
from delivery.providers.base import MESSAGE_ID_KEY
from delivery.providers.events import (
    BounceType,
    EventType,
    NormalizationError,
    NormalizedEvent,
    as_dict,
    iso_time,
    require,
)
from delivery.providers.ses.sns import (
    NOTIFICATION,
    SUBSCRIPTION_CONFIRMATION,
    UNSUBSCRIBE_CONFIRMATION,
    SnsVerifier,
)
from delivery.providers.ses.sns_certs import (
    DEFAULT_CERT_HOST_PATTERNS,
    CertificateStore,
    HttpsCertificateStore,
)
from delivery.providers.webhooks import EspWebhook, SubscriptionHandshake

_TYPES: dict[str, EventType] = {
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
_BOUNCE_TYPES: dict[str, BounceType] = {"Permanent": "hard", "Transient": "soft"}
# Sent by SES once, right after the SNS subscription is set up; not JSON, not an event.
_TOPIC_VALIDATION = "Successfully validated SNS topic for Amazon SES event publishing."


def normalize_ses(sns_message: dict[str, Any]) -> list[NormalizedEvent]:
    """Normalise a verified SNS message carrying an SES event (one event per recipient)."""
    if sns_message.get("Type") != NOTIFICATION:
        return []  # Subscription/UnsubscribeConfirmation carry no mail events
    body = sns_message.get("Message")
    if body == _TOPIC_VALIDATION:
        return []
    ses_event = _json_object(body)
    kind = ses_event.get("eventType") or ses_event.get("notificationType")
    event_type = _TYPES.get(kind) if isinstance(kind, str) else None
    if event_type is None or not _is_tracked(ses_event, kind):
        return []
    detail = _detail(ses_event, kind)
    mail = as_dict(ses_event.get("mail"))
    occurred_at = _time(detail, mail, sns_message)
    return [
        NormalizedEvent(
            provider="ses",
            event_type=event_type,
            recipient=recipient,
            occurred_at=occurred_at,
            provider_message_id=mail.get("messageId"),
            notifier_message_id=_our_id(mail),
            # One SNS message fans out to several recipients; MessageId alone collides.
            provider_event_id=f"{require(sns_message, 'MessageId')}:{recipient}",
            raw=ses_event,
            bounce_type=_BOUNCE_TYPES.get(detail.get("bounceType"), "soft")
            if event_type is EventType.BOUNCED else None,
            url=detail.get("link") if event_type is EventType.CLICKED else None,
        )
        for recipient in _recipients(kind, detail, mail)
    ]


def _json_object(value: Any) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError) as err:
        raise NormalizationError("SNS Message is not JSON") from err
    if not isinstance(parsed, dict):
        raise NormalizationError("SNS Message is not a JSON object")
    return parsed


def _detail(ses_event: dict[str, Any], kind: str) -> dict[str, Any]:
    # Detail object is the lower-camel event name ("bounce", "deliveryDelay"), except
    # "Rendering Failure", whose detail lives under "failure".
    key = "failure" if kind == "Rendering Failure" else kind[0].lower() + kind[1:]
    return as_dict(ses_event.get(key))


def _is_tracked(ses_event: dict[str, Any], kind: str) -> bool:
    # "Subscription" events fire on any preference change; only opt-outs are tracked.
    if kind != "Subscription":
        return True
    prefs = as_dict(as_dict(ses_event.get("subscription")).get("newTopicPreferences"))
    topics = prefs.get("topicSubscriptionStatus") or []
    opted_out = any(as_dict(t).get("subscriptionStatus") == "OptOut" for t in topics)
    return bool(prefs.get("unsubscribeAll")) or opted_out


def _recipients(kind: str, detail: dict[str, Any], mail: dict[str, Any]) -> list[str]:
    # Bounce/Complaint/DeliveryDelay name the affected recipients; Delivery lists plain
    # addresses; Open/Click/Send/Reject don't say which recipient, so use all of them.
    listed = {
        "Bounce": "bouncedRecipients",
        "Complaint": "complainedRecipients",
        "DeliveryDelay": "delayedRecipients",
    }
    if kind in listed:
        entries = detail.get(listed[kind]) or []
        return [require(as_dict(e), "emailAddress") for e in entries]
    if kind == "Delivery" and detail.get("recipients"):
        return [str(r) for r in detail["recipients"]]
    return [str(r) for r in mail.get("destination") or []]


def _our_id(mail: dict[str, Any]) -> str | None:
    # Event publishing copies message tags into mail.tags as {name: [value, ...]};
    # the older notification format has no tags at all.
    values = as_dict(mail.get("tags")).get(MESSAGE_ID_KEY)
    return str(values[0]) if isinstance(values, list) and values else None


def _time(detail: dict[str, Any], mail: dict[str, Any], sns_message: dict[str, Any]) -> datetime:
    for candidate in (detail.get("timestamp"), mail.get("timestamp"), sns_message["Timestamp"]):
        if isinstance(candidate, str):
            return iso_time(candidate)
    raise NormalizationError("SES event has no timestamp")


# ------------------------------------------------------------------------------ the webhook


def is_sns_url(url: str) -> bool:
    """HTTPS on port 443 to an SNS endpoint host (the same patterns as the certificate check)."""
    parts = urlsplit(url)
    if parts.scheme != "https" or parts.username or parts.password:
        return False
    try:
        if parts.port not in (None, 443):
            return False
    except ValueError:
        return False
    host = parts.hostname or ""
    return any(p.fullmatch(host) for p in DEFAULT_CERT_HOST_PATTERNS)


def https_certificate_store() -> CertificateStore:
    return HttpsCertificateStore()


def https_subscription_confirmer() -> Callable[[str], None]:
    def confirm(url: str) -> None:
        if not is_sns_url(url):  # never fetch a URL an attacker could point anywhere
            raise ValueError(f"SubscribeURL host not allowed: {url}")
        response = requests.get(url, timeout=5, allow_redirects=False)
        response.raise_for_status()

    return confirm


def verifier_from_settings() -> SnsVerifier:
    store = import_string(settings.FEEDBACK_SNS_CERTIFICATE_STORE)()
    return SnsVerifier(
        allowed_topic_arns=settings.FEEDBACK_SNS_TOPIC_ARNS,
        certificate_store=store,
        max_age=timedelta(seconds=settings.FEEDBACK_SNS_MAX_AGE_SECONDS),
    )


def confirmer_from_settings() -> Callable[[str], None]:
    return import_string(settings.FEEDBACK_SNS_CONFIRMER)()


_KINDS = {
    SUBSCRIPTION_CONFIRMATION: webhooks.SUBSCRIPTION_CONFIRMATION,
    UNSUBSCRIBE_CONFIRMATION: webhooks.UNSUBSCRIBE_CONFIRMATION,
}


def delivery_kind(message: dict[str, Any]) -> str:
    """An SNS message is a notification (SES events) or one of the subscription handshakes."""
    return _KINDS.get(message["Type"], webhooks.NOTIFICATION)


def confirmation_url(message: dict[str, Any]) -> str | None:
    # Only reached for an allowlisted TopicArn (the verifier refuses others before any fetch);
    # the SubscribeURL must itself point at an SNS endpoint.
    url = message.get("SubscribeURL", "")
    return url if isinstance(url, str) and is_sns_url(url) else None


WEBHOOK = EspWebhook(
    verifier=verifier_from_settings,
    normalize=normalize_ses,
    kind=delivery_kind,
    handshake=SubscriptionHandshake(confirmation_url=confirmation_url, confirmer=confirmer_from_settings),
)

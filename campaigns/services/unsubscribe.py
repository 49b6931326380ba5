"""One-click unsubscribe (RFC 8058): signed per-recipient URLs and the unsubscribe itself.

The token signs "<contact id>.<campaign id>" with Django's Signer (HMAC-SHA256 over the
SECRET_KEY, salted), so it cannot be forged or altered, and stays valid after message rows are
archived. Unsubscribing leaves the campaign's topic, or, for a campaign with none, the service's
broadcast stream (audience.services.consent; decision 106, which revises 48): never the
transactional stream, so an OTP or a password reset still reaches the address.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.urls import get_script_prefix, reverse
from django.utils.encoding import force_bytes

from audience.models import ConsentChange, Contact, Topic
from audience.services.consent import ConsentSubject, broadcast_unsubscribe, topic_subscription_set
from campaigns.models import Campaign
from delivery.extensions import SendableMessage
from delivery.models import EmailMessage
from delivery.services import ledger

Source = ConsentChange.Source

_SIGNER = signing.Signer(salt="notifier.campaigns.unsubscribe")
MS = EmailMessage.Status


def campaign_headers(message: SendableMessage) -> dict[str, str]:
    """One-click unsubscribe headers for campaign mail; none for transactional mail.

    `List-Unsubscribe` with an HTTPS URI signed per recipient and `List-Unsubscribe-Post:
    List-Unsubscribe=One-Click`, which tells the mailbox provider to POST that body to the URI
    (RFC 8058; Gmail and Yahoo require both for bulk senders since 2024). Registered with the
    send path in campaigns/apps.py.
    """
    if not message.campaign_id or not message.contact_id:
        return {}
    url = unsubscribe_url(contact_id=message.contact_id, campaign_id=message.campaign_id)
    return {
        "List-Unsubscribe": f"<{url}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }


@dataclass(frozen=True)
class UnsubscribeTarget:
    contact_id: int
    campaign_id: int


def unsubscribe_token(*, contact_id: int, campaign_id: int) -> str:
    """`_SIGNER.sign(...)`, byte for byte, from a keyed HMAC prepared once per process.

    Signer.sign derives its key (a SHA-256 of salt and secret) and builds a new HMAC per call,
    ~15 us; copying a prepared HMAC costs ~2 us. Same algorithm, key, separator and base64, so
    `_SIGNER.unsign` (and every token already sent) reads it (tests/campaigns check equality)."""
    value = f"{contact_id}.{campaign_id}"
    mac = _prepared_hmac(_SIGNER.key, _SIGNER.salt, _SIGNER.algorithm).copy()
    mac.update(value.encode())
    signature = base64.urlsafe_b64encode(mac.digest()).strip(b"=").decode()
    return f"{value}{_SIGNER.sep}{signature}"


@lru_cache(maxsize=4)
def _prepared_hmac(key: str | bytes, salt: str, algorithm: str) -> hmac.HMAC:
    hasher = getattr(hashlib, algorithm)
    derived = hasher(force_bytes(salt + "signer") + force_bytes(key)).digest()
    return hmac.new(derived, digestmod=hasher)


def unsubscribe_url(*, contact_id: int, campaign_id: int) -> str:
    """The public URL of `reverse("unsubscribe")` for this recipient; the route is resolved once
    per public URL and script prefix (reverse() per message cost ~40 us), then the token is
    placed into it."""
    token = unsubscribe_token(contact_id=contact_id, campaign_id=campaign_id)
    head, tail = _url_around_token(settings.NOTIFIER_PUBLIC_URL, get_script_prefix(), settings.ROOT_URLCONF)
    return f"{head}{token}{tail}"


_TOKEN_PLACEHOLDER = "TOKENPLACEHOLDER"


@lru_cache(maxsize=8)
def _url_around_token(public_url: str, script_prefix: str, urlconf: str) -> tuple[str, str]:
    path = reverse("unsubscribe", args=[_TOKEN_PLACEHOLDER])
    head, _, tail = path.partition(_TOKEN_PLACEHOLDER)
    return public_url.rstrip("/") + head, tail


def unsubscribe_token_read(token: str) -> UnsubscribeTarget | None:
    try:
        contact_id, _, campaign_id = _SIGNER.unsign(token).partition(".")
        return UnsubscribeTarget(int(contact_id), int(campaign_id))
    except (signing.BadSignature, ValueError):
        return None


@dataclass(frozen=True)
class Unsubscribed:
    """What a one-click unsubscribe did: `changed` (False: it was already so), and the topic it
    left (None: the service's whole broadcast stream)."""

    changed: bool
    topic: Topic | None


def contact_unsubscribe(*, contact: Contact, campaign_id: int) -> Unsubscribed:
    """The one-click unsubscribe of a campaign's link: the contact leaves the campaign's topic,
    or, for a campaign with none, the service's broadcast stream (and its unsent campaign rows
    are SUPPRESSED at once). Transactional mail is never stopped by it (decision 106).
    Idempotent; a campaign deleted since leaves the broadcast stream."""
    campaign = Campaign.objects.filter(pk=campaign_id).select_related("topic").first()
    subject = ConsentSubject.of(contact.client_id, contact.email)
    topic = campaign.topic if campaign is not None else None
    if topic is not None:
        changed = topic_subscription_set(subject=subject, topic=topic, subscribed=False, source=Source.LINK,
                                         campaign_id=campaign_id)
        return Unsubscribed(changed, topic)
    with transaction.atomic():
        changed = broadcast_unsubscribe(subject=subject, source=Source.LINK, campaign_id=campaign_id)
        ledger.contact_campaign_messages_suppress(contact_id=contact.pk, error="unsubscribed")
    return Unsubscribed(changed, None)


def contact_deleted_rows_suppress(sender: object, instance: Contact, **_: object) -> None:
    """pre_delete of a contact: its unsent campaign rows are SUPPRESSED before the delete sets
    their contact to NULL. Campaign rows carry no copy of the contact's data any more (decision
    65), and a deleted contact is not mailed. A row deleted past this (raw SQL) keeps a dangling
    contact id, which the send path suppresses too; only a row a worker claimed in the instant
    before renders with what it carries. Connected in campaigns/apps.py."""
    ledger.contact_campaign_messages_suppress(
        contact_id=instance.pk, error=ledger.CONTACT_GONE_ERROR, statuses=(MS.QUEUED, MS.SCHEDULED)
    )

"""One-click unsubscribe (RFC 8058): signed per-recipient URLs and the unsubscribe itself.

The token signs "<contact id>.<campaign id>" with Django's Signer (HMAC-SHA256 over the
SECRET_KEY, salted), so it cannot be forged or altered, and stays valid after message rows are
archived. Unsubscribing clears the contact's `subscribed` flag (future fan-outs skip it), marks
its still-QUEUED campaign rows SUPPRESSED, so a running campaign stops mailing it at once, and
adds a Suppression (reason unsubscribe), as an ESP-reported unsubscribe already did, so the
opt-out shows in GET /api/v1/suppressions (decision 48, which revises 24).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.urls import reverse

from audience.models import Contact, Suppression
from audience.services.contacts import suppression_create
from delivery.models import EmailMessage
from delivery.services import ledger

_SIGNER = signing.Signer(salt="notifier.campaigns.unsubscribe")
MS = EmailMessage.Status


def campaign_headers(message: EmailMessage) -> dict[str, str]:
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
    return _SIGNER.sign(f"{contact_id}.{campaign_id}")


def unsubscribe_url(*, contact_id: int, campaign_id: int) -> str:
    token = unsubscribe_token(contact_id=contact_id, campaign_id=campaign_id)
    return settings.NOTIFIER_PUBLIC_URL.rstrip("/") + reverse("unsubscribe", args=[token])


def unsubscribe_token_read(token: str) -> UnsubscribeTarget | None:
    try:
        contact_id, _, campaign_id = _SIGNER.unsign(token).partition(".")
        return UnsubscribeTarget(int(contact_id), int(campaign_id))
    except (signing.BadSignature, ValueError):
        return None


@transaction.atomic
def contact_unsubscribe(*, contact_id: int) -> bool:
    """Idempotent: True when this call changed the contact."""
    changed = Contact.objects.filter(pk=contact_id, subscribed=True).update(subscribed=False)
    contact = Contact.objects.filter(pk=contact_id).values("email", "client_id").first()
    if contact:
        # An address already suppressed (a bounce, an earlier click) keeps its row and reason.
        suppression_create(email=contact["email"], reason=Suppression.Reason.UNSUBSCRIBE,
                           source="unsubscribe-link", client_id=contact["client_id"])
    ledger.contact_campaign_messages_suppress(contact_id=contact_id, error="unsubscribed")
    return bool(changed)

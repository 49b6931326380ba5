"""One-click unsubscribe (RFC 8058): what a click on a broadcast message's link does.

It leaves the mail's topic, or, for mail with none, the service's broadcast stream
(audience.services.consent; decision 106, which revises 48): never the transactional stream, so
an OTP or a password reset still reaches the address. Idempotent: a repeat changes nothing and
records nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from audience.models import ConsentChange, Contact, Topic
from audience.services.consent import ConsentSubject, broadcast_unsubscribe, topic_subscription_set
from consent.extensions import campaign_topic
from consent.tokens import AddressTarget
from delivery.services import ledger

Source = ConsentChange.Source


@dataclass(frozen=True)
class Unsubscribed:
    """What a one-click unsubscribe did: `changed` (False: it was already so), and the topic it
    left (None: the service's whole broadcast stream)."""

    changed: bool
    topic: Topic | None


def contact_unsubscribe(*, contact: Contact, campaign_id: int) -> Unsubscribed:
    """A campaign link's unsubscribe: the contact leaves the campaign's topic, or, for a campaign
    with none (or deleted since), the service's broadcast stream, and its unsent campaign rows
    are SUPPRESSED at once."""
    subject = ConsentSubject.of(contact.client_id, contact.email)
    topic = campaign_topic(campaign_id)
    if topic is not None:
        changed = topic_subscription_set(subject=subject, topic=topic, subscribed=False, source=Source.LINK,
                                         campaign_id=campaign_id)
        return Unsubscribed(changed, topic)
    with transaction.atomic():
        changed = broadcast_unsubscribe(subject=subject, source=Source.LINK, campaign_id=campaign_id)
        ledger.contact_campaign_messages_suppress(contact_id=contact.pk, error="unsubscribed")
    return Unsubscribed(changed, None)


def address_unsubscribe(*, target: AddressTarget) -> Unsubscribed:
    """An address link's unsubscribe (a broadcast message with no contact): the address leaves
    the topic the link names (the service's own; an archived one too: the mail was about it), or
    the service's broadcast stream."""
    subject = ConsentSubject.of(target.service_id, target.email)
    topic = None
    if target.topic_id is not None:
        topic = Topic.objects.filter(pk=target.topic_id, client_id=target.service_id).first()
    if topic is not None:
        changed = topic_subscription_set(subject=subject, topic=topic, subscribed=False, source=Source.LINK,
                                         campaign_id=target.campaign_id)
        return Unsubscribed(changed, topic)
    changed = broadcast_unsubscribe(subject=subject, source=Source.LINK, campaign_id=target.campaign_id)
    return Unsubscribed(changed, None)

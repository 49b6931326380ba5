"""One-click unsubscribe (RFC 8058): what a click on a broadcast message's link does.

It leaves the mail's topic, or, for mail with none, the service's broadcast stream
(audience.services.consent; decision 106, which revises 48): never the transactional stream, so
an OTP or a password reset still reaches the address. Idempotent: a repeat changes nothing and
records nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from audience.models import ConsentChange, Contact, Topic
from audience.services.consent import ConsentSubject, broadcast_unsubscribe, topic_subscription_set
from consent.extensions import campaign_topic
from consent.tokens import AddressTarget
from delivery.selectors import campaign_message_sent_to
from delivery.services import ledger
from feedback.services.link_events import link_unsubscribe_record

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
    are SUPPRESSED at once. A change counts as the unsubscribe of the campaign's mail to them."""
    subject = ConsentSubject.of(contact.client_id, contact.email)
    topic = campaign_topic(campaign_id)
    with transaction.atomic():
        changed = _leave(subject, topic, campaign_id)
        if topic is None:
            ledger.contact_campaign_messages_suppress(contact_id=contact.pk, error="unsubscribed")
        if changed:
            sent = campaign_message_sent_to(campaign_id=campaign_id, contact_id=contact.pk)
            _message_unsubscribe_count(sent, contact.email)
    return Unsubscribed(changed, topic)


def address_unsubscribe(*, target: AddressTarget) -> Unsubscribed:
    """An address link's unsubscribe (a broadcast message with no contact): the address leaves
    the topic the link names (the service's own; an archived one too: the mail was about it), or
    the service's broadcast stream."""
    subject = ConsentSubject.of(target.service_id, target.email)
    topic = None
    if target.topic_id is not None:
        topic = Topic.objects.filter(pk=target.topic_id, client_id=target.service_id).first()
    with transaction.atomic():
        changed = _leave(subject, topic, target.campaign_id)
        if changed and target.campaign_id is not None:
            sent = campaign_message_sent_to(campaign_id=target.campaign_id, service_id=target.service_id,
                                            recipient=target.email)
            _message_unsubscribe_count(sent, target.email)
    return Unsubscribed(changed, topic)


def _leave(subject: ConsentSubject, topic: Topic | None, campaign_id: int | None) -> bool:
    """The link's consent change: leave `topic`, or with none the service's broadcast stream;
    False when it was already so (the history records only changes)."""
    if topic is not None:
        return topic_subscription_set(subject=subject, topic=topic, subscribed=False, source=Source.LINK,
                                      campaign_id=campaign_id)
    return broadcast_unsubscribe(subject=subject, source=Source.LINK, campaign_id=campaign_id)


def _message_unsubscribe_count(message_id: int | None, recipient: str) -> None:
    """The mail that carried the link counts the unsubscribe, as an ESP's unsubscribe event
    about it would (decision 143). A one-off broadcast send's link names no campaign, and a
    message past its retention no address: the history alone records those."""
    if message_id is not None:
        link_unsubscribe_record(message_id=message_id, recipient=recipient, occurred_at=timezone.now())

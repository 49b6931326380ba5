"""An unsubscribe through our one-click link counts as its message's unsubscribe (decision 143):
in the campaign's counts, rates and series, and in the day's facts, once per message, as an
ESP's unsubscribe event would; the link alone decides the consent change (topic or stream)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from analytics.models import DayFact
from analytics.services.facts import facts_write_day
from audience.models import ConsentChange, Contact, Topic
from campaigns.models import Campaign
from consent.tokens import address_unsubscribe_token, unsubscribe_token
from delivery.models import EmailMessage, ProviderEventCoverage
from feedback.models import CampaignEventCounter, EmailEvent
from feedback.normalize import EventType, NormalizedEvent
from feedback.services.link_events import link_unsubscribe_record
from feedback.services.processing import events_process
from tests import factories

pytestmark = pytest.mark.django_db
MS = EmailMessage.Status


def _campaign(*, topic: Topic | None = None) -> Campaign:
    version = factories.template_version()
    return Campaign.objects.create(name="news", client=factories.owner(), template_version=version,
                                   status="SENDING", topic=topic)


def _sent(campaign: Campaign, *, contact: Contact | None, recipient: str, **fields) -> EmailMessage:
    return factories.email_message(version=campaign.template_version, client=campaign.client,
                                   campaign=campaign, contact=contact, recipient=recipient, status=MS.SENT,
                                   provider="smtp", sent_at=timezone.now(), priority=2, **fields)


def _contact(email: str = "ada@x.io") -> Contact:
    return Contact.objects.create(client=factories.owner(), email=email)


def _click(token: str) -> None:
    response = Client().post(f"/u/{token}/", "List-Unsubscribe=One-Click",
                             content_type="application/x-www-form-urlencoded")
    assert response.status_code == 200


def _counted(campaign: Campaign) -> int:
    counter = CampaignEventCounter.objects.filter(campaign_id=campaign.pk).first()
    return counter.unsubscribed if counter else 0


def test_a_contacts_link_counts_once_in_the_campaigns_stats(api):
    campaign = _campaign()
    contact = _contact()
    earlier = _sent(campaign, contact=contact, recipient="ada@x.io")
    message = _sent(campaign, contact=contact, recipient="ada@x.io")
    waiting = factories.email_message(version=campaign.template_version, campaign=campaign, contact=contact,
                                      recipient="ada@x.io", priority=2)
    token = unsubscribe_token(contact_id=contact.pk, campaign_id=campaign.pk)
    for _ in range(3):  # the mailbox's one-click POST, then the person's own clicks
        _click(token)
    [event] = EmailEvent.objects.filter(provider="link")
    assert (event.message_id, event.event_type, event.recipient) == (message.pk, "unsubscribed", "ada@x.io")
    assert earlier.pk != message.pk  # the latest mail sent to them carried the link they used
    stats = api.get(f"/api/v1/campaigns/{campaign.pk}/stats", {"interval": "day"}).json()
    assert stats["counts"]["unsubscribed"] == 1
    assert stats["unsubscribes_by_topic"] == [{"topic": None, "unsubscribed": 1}]
    assert sum(point.get("unsubscribed", 0) for point in stats["series"]["points"]) == 1
    # The sent mail keeps its status; the unsent one is suppressed, by consent as before.
    assert EmailMessage.objects.get(pk=message.pk).status == MS.SENT
    assert EmailMessage.objects.get(pk=waiting.pk).status == MS.SUPPRESSED
    assert not Contact.objects.get(pk=contact.pk).subscribed


def test_a_topic_link_leaves_the_topic_only_and_counts(api):
    topic = Topic.objects.create(client=factories.owner(), name="Weekly digest")
    campaign = _campaign(topic=topic)
    contact = _contact()
    _sent(campaign, contact=contact, recipient="ada@x.io")
    _click(unsubscribe_token(contact_id=contact.pk, campaign_id=campaign.pk))
    assert _counted(campaign) == 1
    # The event is not an ESP's unsubscribe: it does not also take the address out of the
    # service's whole broadcast stream (feedback's suppression path skips it).
    assert Contact.objects.get(pk=contact.pk).subscribed
    assert list(ConsentChange.objects.values_list("topic_id", "source")) == [(topic.pk, "link")]


def test_an_address_link_finds_its_message_in_any_case(api):
    campaign = _campaign()
    message = _sent(campaign, contact=None, recipient="Grace@X.io")
    token = address_unsubscribe_token(service_id=campaign.client_id, email="grace@x.io",
                                      campaign_id=campaign.pk)
    _click(token)
    events = EmailEvent.objects.filter(provider="link")
    assert list(events.values_list("message_id", flat=True)) == [message.pk]
    assert _counted(campaign) == 1


def test_no_mail_sent_counts_nothing_and_the_consent_change_stands():
    campaign = _campaign()
    contact = _contact()
    factories.email_message(version=campaign.template_version, campaign=campaign, contact=contact,
                            recipient="ada@x.io", priority=2)  # still QUEUED: no mail carried a link
    _click(unsubscribe_token(contact_id=contact.pk, campaign_id=campaign.pk))
    assert not EmailEvent.objects.exists() and _counted(campaign) == 0
    assert ConsentChange.objects.filter(campaign_id=campaign.pk, subscribed=False).count() == 1


def test_an_esp_unsubscribe_of_the_same_message_is_not_counted_twice():
    campaign = _campaign()
    contact = _contact()
    message = _sent(campaign, contact=contact, recipient="ada@x.io")
    _click(unsubscribe_token(contact_id=contact.pk, campaign_id=campaign.pk))
    esp = NormalizedEvent(provider="sendgrid", event_type=EventType.UNSUBSCRIBED, recipient="ada@x.io",
                          occurred_at=timezone.now(), provider_message_id=None,
                          notifier_message_id=str(message.pk), provider_event_id="sg-1", raw={})
    report = events_process(events=[esp])
    assert (report.new, report.new_marks) == (1, 0)
    assert _counted(campaign) == 1


def test_the_days_facts_count_the_link_unsubscribe():
    campaign = _campaign()
    contact = _contact()
    _sent(campaign, contact=contact, recipient="ada@x.io")
    _click(unsubscribe_token(contact_id=contact.pk, campaign_id=campaign.pk))
    today = timezone.now().date()
    facts_write_day(today, now=timezone.now() + timedelta(days=1))
    fact = DayFact.objects.get(campaign_id=campaign.pk)
    assert (fact.sent, fact.unsubscribed) == (1, 1)


def test_the_record_commits_durably_inside_the_consent_change():
    """The relaxed commit of ESP batches (`synchronous_commit = off`) would also cover the consent
    change in the same transaction, which the recipient was told had happened."""
    campaign = _campaign()
    message = _sent(campaign, contact=_contact(), recipient="ada@x.io")
    click = {"message_id": message.pk, "recipient": "ada@x.io", "occurred_at": timezone.now()}
    with transaction.atomic(), connection.cursor() as cursor:
        assert link_unsubscribe_record(**click)
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"
    assert not link_unsubscribe_record(**click)  # the second click of the same message


def test_a_link_event_is_no_evidence_about_an_esp():
    """No ESP reported it: it neither settles an AMBIGUOUS send as accepted nor moves any
    provider's event coverage (delivery.services.ambiguity)."""
    campaign = _campaign()
    held = _sent(campaign, contact=_contact(), recipient="ada@x.io", send_started_at=timezone.now())
    EmailMessage.objects.filter(pk=held.pk).update(status=MS.AMBIGUOUS)
    assert link_unsubscribe_record(message_id=held.pk, recipient="ada@x.io", occurred_at=timezone.now())
    assert EmailMessage.objects.get(pk=held.pk).status == MS.AMBIGUOUS
    assert not ProviderEventCoverage.objects.exists()

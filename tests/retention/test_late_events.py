"""A late ESP event about a message whose personal data was removed (issue 30, decision 120)
is still recorded: a signed SendGrid webhook over real HTTP, stored and processed as the ops
worker does, moves the status, counts once in the campaign's counters, writes the service's
event (with no recipient), stores the ESP event without the address or payload, and a hard
bounce still suppresses the address the ESP names when its keyed hash is the message's. An
event naming another address suppresses nothing; one matched only by the ESP's message id is
recorded the same."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import requests

from audience.models import Suppression
from clients.personal_data import personal_data_expire
from delivery.models import EmailMessage
from eventlog.models import RecordedEventTypes, ServiceEvent
from eventlog.types import ALL_EVENT_TYPES
from feedback.models import CampaignEventCounter, EmailEvent, WebhookDelivery
from feedback.normalize import EventType as E
from feedback.services.processing import events_process
from feedback.services.webhooks import webhook_delivery_process
from tests import factories
from tests.feedback import samples
from tests.feedback.conftest import _signers, webhook_keys  # noqa: F401 - the signed-webhook fixtures
from tests.feedback.helpers import campaign, event, sent_messages

pytestmark = pytest.mark.django_db(transaction=True)
NOW = datetime.now(UTC)


def _strip_everything() -> None:
    done = personal_data_expire(as_of=datetime.now(UTC) + timedelta(days=30))
    assert done["messages"] > 0


def _post_sendgrid(live_server, keys, events: list[dict]) -> None:
    body = json.dumps(events).encode()
    response = requests.post(f"{live_server.url}/webhooks/sendgrid/", data=body, timeout=10,
                             headers={"Content-Type": "application/json", **keys.sendgrid.sign(body)})
    assert response.status_code in (200, 202, 204), response.text
    for delivery in WebhookDelivery.objects.filter(status="pending").order_by("id"):
        webhook_delivery_process(delivery_id=delivery.id)


def test_a_late_bounce_of_a_stripped_message_is_recorded_and_suppresses_its_address(
        live_server, webhook_keys):  # noqa: F811
    owner = factories.owner()
    RecordedEventTypes.objects.create(service=owner, types=list(ALL_EVENT_TYPES))
    c = campaign()
    bounced, misnamed = sent_messages(2, campaign_obj=c)
    _strip_everything()
    assert EmailMessage.objects.get(pk=bounced.pk).recipient == ""

    _post_sendgrid(live_server, webhook_keys, [
        samples.sendgrid_event("bounce", message_id=bounced.id, recipient=bounced.recipient.upper(),
                               when=NOW, event_id=f"late-bounce-{bounced.id}"),
        samples.sendgrid_event("bounce", message_id=misnamed.id, recipient="someone.else@example.com",
                               when=NOW, event_id=f"late-bounce-{misnamed.id}")])

    for message in (bounced, misnamed):
        row = EmailMessage.objects.get(pk=message.pk)
        assert (row.status, row.recipient) == ("BOUNCED", "")
        stored = EmailEvent.objects.get(message=message)
        assert (stored.event_type, stored.recipient, stored.raw) == ("bounced", "", {})
        logged = ServiceEvent.objects.get(message_id=message.pk, type="message.bounced")
        assert logged.data["recipient"] is None and logged.data["bounce_type"] == "hard"
    assert CampaignEventCounter.objects.get(pk=c.pk).bounced == 2
    assert set(Suppression.objects.values_list("email", flat=True)) == {bounced.recipient.lower()}


def test_a_late_event_found_by_the_esps_message_id_alone_is_recorded(settings):
    (message,) = sent_messages(1)
    _strip_everything()
    late = event(None, E.DELIVERED, recipient=message.recipient,
                 provider_message_id=message.provider_message_id)
    report = events_process(events=[late])
    assert (report.new, report.unknown) == (1, 0)
    row = EmailMessage.objects.get(pk=message.pk)
    assert row.status == "DELIVERED" and row.delivered_at is not None and row.recipient == ""
    assert EmailEvent.objects.get(message=message).recipient == ""

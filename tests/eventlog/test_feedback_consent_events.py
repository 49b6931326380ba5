"""What the ESPs report and what recipients choose reaches the service's event log in the same
transaction as the change (decision 115): a signed SendGrid webhook over real HTTP, stored and
processed as the ops worker's task does, writes delivered / opened / bounced once per message
however often it is posted; the one-click link, the suppressions API and a bulk load write
recipient.unsubscribed and recipient.preferences_changed once per real change."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

import pytest
import requests
from django.test import Client

from audience.models import Contact, Topic
from campaigns.models import Campaign
from clients.services import service_create
from delivery.extensions import message_headers
from eventlog.models import RecordedEventTypes, ServiceEvent
from eventlog.types import ALL_EVENT_TYPES
from feedback.models import WebhookDelivery
from feedback.services.webhooks import webhook_delivery_process
from tests import factories
from tests.feedback import samples
from tests.feedback.conftest import _signers, webhook_keys  # noqa: F401 - the signed-webhook fixtures
from tests.feedback.helpers import sent_messages

pytestmark = pytest.mark.django_db(transaction=True)
NOW = datetime.now(UTC)


def _record_all(service) -> None:
    RecordedEventTypes.objects.create(service=service, types=list(ALL_EVENT_TYPES))


def _post_sendgrid(live_server, keys, events: list[dict]) -> None:
    body = json.dumps(events).encode()
    response = requests.post(f"{live_server.url}/webhooks/sendgrid/", data=body, timeout=10,
                             headers={"Content-Type": "application/json", **keys.sendgrid.sign(body)})
    assert response.status_code in (200, 202, 204), response.text


def _events(service) -> Counter:
    return Counter(ServiceEvent.objects.filter(service=service).values_list("message_id", "type"))


def test_webhook_events_are_recorded_once_each(live_server, webhook_keys):  # noqa: F811
    owner = factories.owner()
    _record_all(owner)
    opened, bounced = sent_messages(2)
    silent, _ = service_create(name="silent")
    (quiet,) = sent_messages(1, prefix="quiet")
    type(quiet).objects.filter(pk=quiet.pk).update(client=silent)

    def event(kind: str, message, **extra) -> dict:
        return samples.sendgrid_event(kind, message_id=message.id, recipient=message.recipient, when=NOW,
                                      event_id=f"{kind}-{message.id}", **extra)

    batch = [event("delivered", opened), event("open", opened), event("bounce", bounced),
             event("delivered", quiet)]
    for _ in range(2):  # the ESP posts the same batch again: nothing is recorded twice
        _post_sendgrid(live_server, webhook_keys, batch)
    _post_sendgrid(live_server, webhook_keys, [{**event("open", opened), "sg_event_id": "open-again"}])
    for delivery in WebhookDelivery.objects.order_by("id"):
        webhook_delivery_process(delivery_id=delivery.id)

    assert _events(owner) == Counter({(opened.id, "message.delivered"): 1, (opened.id, "message.opened"): 1,
                                      (bounced.id, "message.bounced"): 1})
    bounce = ServiceEvent.objects.get(type="message.bounced")
    assert bounce.data["bounce_type"] == "hard" and bounce.data["recipient"] == bounced.recipient
    assert bounce.data["provider"] == "sendgrid"
    assert not ServiceEvent.objects.filter(service=silent).exists()


def test_the_one_click_link_records_one_unsubscribe_however_often_it_is_posted():
    """...and the contact's QUEUED campaign row it withholds records message.suppressed."""
    owner = factories.owner()
    _record_all(owner)
    version = factories.template_version()
    contact = Contact.objects.create(client=owner, email="ada@x.io")
    campaign = Campaign.objects.create(name="c", template_version=version, status="SENDING", client=owner)
    message = factories.email_message(version=version, campaign=campaign, contact=contact,
                                      recipient="ada@x.io", client=owner)
    url = message_headers(message)["List-Unsubscribe"].strip("<>").removeprefix("http://127.0.0.1:8000")
    for _ in range(3):
        response = Client().post(url, "List-Unsubscribe=One-Click",
                                 content_type="application/x-www-form-urlencoded")
        assert response.status_code == 200
    # The unsubscribe, and the contact's waiting campaign row withheld by the same click.
    assert _events(owner) == Counter({(None, "recipient.unsubscribed"): 1,
                                      (message.id, "message.suppressed"): 1})
    event = ServiceEvent.objects.get(service=owner, type="recipient.unsubscribed")
    assert event.data == {"recipient": "ada@x.io", "topic": None, "subscribed": False, "source": "link",
                          "campaign_id": campaign.pk}


def test_the_api_records_leaving_and_coming_back_and_bulk_topic_choices(api):
    owner = factories.owner()
    _record_all(owner)
    for _ in range(2):
        assert api.post("/api/v1/suppressions", {"email": "bob@x.io", "scope": "broadcast"},
                        format="json").status_code in (200, 201)
    assert api.delete("/api/v1/suppressions/bob@x.io").status_code == 204
    news = Topic.objects.create(client=owner, name="news")
    rows = [{"email": "ada@x.io", "topics": {"news": False}}, {"email": "cy@x.io", "topics": {"news": True}}]
    for _ in range(2):
        assert api.post("/api/v1/contacts/bulk", {"contacts": rows}, format="json").status_code == 200
    recorded = sorted(ServiceEvent.objects.filter(service=owner)
                      .values_list("type", "data__recipient", "data__topic", "data__source"))
    assert recorded == [
        ("recipient.preferences_changed", "bob@x.io", None, "api"),
        ("recipient.unsubscribed", "ada@x.io", news.name, "import"),
        ("recipient.unsubscribed", "bob@x.io", None, "api"),
    ]

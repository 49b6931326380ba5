"""Drops and the address an event acts on: signed webhooks over HTTP, then processed (issue 12).

A drop (SendGrid `dropped`, Mailgun `rejected` or a `failed` on its suppression list) fails the
message; when the ESP names its bounce, unsubscribe or spam-report list as the reason, the
recipient is suppressed with the matching reason. An event about our message acts on that
message's recipient, never on another address the event names.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest
import requests

from delivery.models import EmailMessage
from feedback.models import WebhookDelivery
from feedback.services.webhooks import webhook_delivery_process
from testkit.webhook_signing import mailgun_body
from tests.feedback import samples
from tests.feedback.helpers import sent_messages

pytestmark = pytest.mark.django_db(transaction=True)
NOW = datetime.now(UTC)
STRANGER = "stranger@elsewhere.example"


def post(live_server, path: str, body: bytes, headers: dict[str, str] | None = None) -> None:
    headers = {"Content-Type": "application/json", **(headers or {})}
    response = requests.post(f"{live_server.url}{path}", data=body, headers=headers, timeout=10)
    assert response.status_code == 200, response.text


def process_all() -> None:
    for delivery_id in WebhookDelivery.objects.order_by("id").values_list("id", flat=True):
        webhook_delivery_process(delivery_id=delivery_id)


def listed_suppressions(api) -> set[tuple[str, str]]:
    response = api.get("/api/v1/suppressions")
    assert response.status_code == 200
    return {(row["email"], row["reason"]) for row in response.json()["results"]}


def status(message: EmailMessage) -> str:
    return EmailMessage.objects.get(pk=message.pk).status


SENDGRID_DROPS = {
    "Bounced Address": "hard_bounce",
    "Unsubscribed Address": "unsubscribe",
    "Spam Reporting Address": "complaint",
    "Invalid": None,  # an address SendGrid cannot parse: no list, nothing to suppress
}


@pytest.mark.parametrize("reason", SENDGRID_DROPS)
def test_sendgrid_dropped_fails_the_message_and_suppresses_by_reason(live_server, webhook_keys, api, reason):
    (message,) = sent_messages(1)
    event = samples.sendgrid_dropped(message_id=message.id, recipient=message.recipient, when=NOW,
                                     event_id=f"sg-drop-{message.id}", reason=reason)
    body = json.dumps([event]).encode()
    post(live_server, "/webhooks/sendgrid/", body, webhook_keys.sendgrid.sign(body))
    process_all()
    assert status(message) == "FAILED"
    expected = SENDGRID_DROPS[reason]
    assert listed_suppressions(api) == ({(message.recipient, expected)} if expected else set())


MAILGUN_SUPPRESSED = {
    "suppress-bounce": "hard_bounce",
    "suppress-unsubscribe": "unsubscribe",
    "suppress-complaint": "complaint",
}


@pytest.mark.parametrize("reason", MAILGUN_SUPPRESSED)
def test_mailgun_drop_on_its_suppression_list_fails_and_suppresses(live_server, webhook_keys, api, reason):
    (message,) = sent_messages(1)
    data = samples.mailgun_event_data("failed", message_id=message.id, recipient=message.recipient,
                                      when=NOW, event_id=f"mg-drop-{message.id}")
    data["reason"] = reason
    post(live_server, "/webhooks/mailgun/", mailgun_body(webhook_keys.mailgun_key, data))
    process_all()
    assert status(message) == "FAILED"
    assert listed_suppressions(api) == {(message.recipient, MAILGUN_SUPPRESSED[reason])}


def test_mailgun_rejected_fails_the_message_and_suppresses_nothing(live_server, webhook_keys, api):
    (message,) = sent_messages(1)
    data = samples.mailgun_rejected(message_id=message.id, recipient=message.recipient, when=NOW,
                                    event_id=f"mg-rej-{message.id}")
    post(live_server, "/webhooks/mailgun/", mailgun_body(webhook_keys.mailgun_key, data))
    process_all()
    assert status(message) == "FAILED"
    assert listed_suppressions(api) == set()


def test_a_drop_outranks_earlier_statuses_and_repeats_change_nothing(live_server, webhook_keys, api):
    delivered, failed_at_send = sent_messages(2)
    EmailMessage.objects.filter(pk=failed_at_send.pk).update(status="FAILED", error="550 at send")
    events = [samples.sendgrid_event("delivered", message_id=delivered.id, recipient=delivered.recipient,
                                     when=NOW, event_id=f"sg-d-{delivered.id}")]
    events += [samples.sendgrid_dropped(message_id=m.id, recipient=m.recipient, when=NOW,
                                        event_id=f"sg-drop-{m.id}", reason="Bounced Address")
               for m in (delivered, failed_at_send)]
    for _ in range(2):  # SendGrid retries a batch it thinks failed
        body = json.dumps(events).encode()
        post(live_server, "/webhooks/sendgrid/", body, webhook_keys.sendgrid.sign(body))
    process_all()
    assert (status(delivered), status(failed_at_send)) == ("FAILED", "FAILED")
    assert EmailMessage.objects.get(pk=failed_at_send.pk).error == "550 at send"
    bounced = {(m.recipient, "hard_bounce") for m in (delivered, failed_at_send)}
    assert listed_suppressions(api) == bounced


def _mailgun_complaint(keys, message: EmailMessage) -> tuple[str, bytes, dict[str, str]]:
    data = samples.mailgun_event_data("complained", message_id=message.id, recipient=STRANGER, when=NOW,
                                      event_id=f"mg-c-{message.id}")
    return "/webhooks/mailgun/", mailgun_body(keys.mailgun_key, data), {}


def _sendgrid_complaint(keys, message: EmailMessage) -> tuple[str, bytes, dict[str, str]]:
    event = samples.sendgrid_event("spamreport", message_id=message.id, recipient=STRANGER, when=NOW,
                                   event_id=f"sg-c-{message.id}")
    body = json.dumps([event]).encode()
    return "/webhooks/sendgrid/", body, keys.sendgrid.sign(body)


def _ses_complaint(keys, message: EmailMessage) -> tuple[str, bytes, dict[str, str]]:
    event = samples.ses_event("Complaint", message_id=message.id, recipient=message.recipient, when=NOW)
    event["complaint"]["complainedRecipients"] = [{"emailAddress": STRANGER}]
    return "/webhooks/ses/", json.dumps(keys.sns.notification(event)).encode(), {}


COMPLAINTS = {"mailgun": _mailgun_complaint, "sendgrid": _sendgrid_complaint, "ses": _ses_complaint}


@pytest.mark.parametrize("provider", COMPLAINTS)
def test_a_complaint_naming_another_address_suppresses_our_recipient_and_warns(
    live_server, webhook_keys, api, caplog, provider
):
    (message,) = sent_messages(1)
    path, body, headers = COMPLAINTS[provider](webhook_keys, message)
    post(live_server, path, body, headers)
    with caplog.at_level(logging.WARNING, logger="feedback.services.suppression"):
        process_all()
    assert status(message) == "COMPLAINED"
    assert listed_suppressions(api) == {(message.recipient, "complaint")}
    [warning] = [r.getMessage() for r in caplog.records if r.name == "feedback.services.suppression"]
    assert STRANGER in warning and message.recipient in warning and f"message {message.id} " in warning

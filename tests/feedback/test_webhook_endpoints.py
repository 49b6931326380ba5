"""The three webhook endpoints over real HTTP (live server): verify, store, then 2xx; else 4xx.

Keys are generated per test session; payloads follow each provider's documented samples.
Every rejection is checked for "nothing changed" (no delivery row, no event) and "nothing
fetched" (the certificate store and the subscription confirmer saw no request).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest
import requests
from django.db import connection

from audience.models import Suppression
from delivery.models import EmailMessage
from feedback.models import EmailEvent, WebhookDelivery
from feedback.services.webhooks import webhook_delivery_process
from testkit.webhook_signing import SnsTestSigner, mailgun_body
from tests.feedback import hooks, samples
from tests.feedback.helpers import sent_messages

pytestmark = pytest.mark.django_db(transaction=True)
NOW = datetime.now(UTC)
FOREIGN_TOPIC = "arn:aws:sns:us-east-1:999999999999:evil"


@pytest.fixture
def outbound(monkeypatch) -> list[str]:
    """Every HTTP request this process makes to anything but the loopback live server."""
    seen: list[str] = []
    original = requests.Session.send

    def send(self, request, **kwargs):
        if urlsplit(request.url).hostname not in ("127.0.0.1", "localhost"):
            seen.append(request.url)
            raise requests.ConnectionError("outbound request blocked by the test")
        return original(self, request, **kwargs)

    monkeypatch.setattr(requests.Session, "send", send)
    return seen


def post(live_server, path: str, body: bytes, headers: dict[str, str] | None = None) -> requests.Response:
    headers = {"Content-Type": "application/json", **(headers or {})}
    return requests.post(f"{live_server.url}{path}", data=body, headers=headers, timeout=10)


def ses_body(keys, kind: str = "Bounce", version: str = "2", **kwargs) -> bytes:
    event = samples.ses_event(kind, message_id=1, recipient="ada@example.com", when=NOW)
    return json.dumps(keys.sns.notification(event, version=version, **kwargs)).encode()


def sendgrid_request(keys, *, timestamp: int | None = None) -> tuple[bytes, dict[str, str]]:
    events = [
        samples.sendgrid_event(kind, message_id=1, recipient="ada@example.com", when=NOW,
                               event_id=f"sg-{kind}")
        for kind in samples.SENDGRID_KINDS
    ]
    body = json.dumps(events).encode()
    return body, keys.sendgrid.sign(body, timestamp=timestamp)


def mailgun_request(keys, *, timestamp: int | None = None, token: str | None = None) -> bytes:
    data = samples.mailgun_event_data("delivered", message_id=1, recipient="ada@example.com",
                                      when=NOW, event_id="mg-delivered-1")
    return mailgun_body(keys.mailgun_key, data, timestamp=timestamp, token=token)


def assert_nothing_changed(outbound: list[str]) -> None:
    assert WebhookDelivery.objects.count() == 0
    assert EmailEvent.objects.count() == 0
    assert hooks.confirmed == []
    assert outbound == []


@pytest.mark.parametrize("kind", samples.SES_KINDS)
@pytest.mark.parametrize("version", ["1", "2"])
def test_signed_ses_notifications_are_stored_then_acknowledged(
    live_server, webhook_keys, outbound, kind, version
):
    body = ses_body(webhook_keys, kind, version)
    response = post(live_server, "/webhooks/ses/", body)
    assert response.status_code == 200, response.text
    stored = WebhookDelivery.objects.get()
    assert (stored.provider, stored.body.encode(), stored.status) == ("ses", body, "pending")
    assert hooks.current_store.requested == [webhook_keys.sns.cert_url]
    assert outbound == []


def test_signed_sendgrid_batch_is_stored(live_server, webhook_keys, outbound):
    body, headers = sendgrid_request(webhook_keys)
    response = post(live_server, "/webhooks/sendgrid/", body, headers)
    assert response.status_code == 200, response.text
    assert WebhookDelivery.objects.get().body.encode() == body


def test_signed_mailgun_event_is_stored(live_server, webhook_keys, outbound):
    response = post(live_server, "/webhooks/mailgun/", mailgun_request(webhook_keys))
    assert response.status_code == 200, response.text
    assert WebhookDelivery.objects.get().provider == "mailgun"


def _forged_sns(keys) -> bytes:
    other = SnsTestSigner.generate(keys.sns.cert_url)  # same URL, attacker's own key
    event = samples.ses_event("Bounce", message_id=1, recipient="ada@example.com", when=NOW)
    return json.dumps(other.notification(event)).encode()


def _tampered_sns(keys) -> bytes:
    message = json.loads(ses_body(keys))
    message["Message"] = message["Message"].replace("ada@example.com", "eve@example.com")
    return json.dumps(message).encode()


def _foreign_cert_url(keys) -> bytes:
    evil = SnsTestSigner.generate("https://sns.us-east-1.amazonaws.com.evil.example/cert.pem")
    event = samples.ses_event("Bounce", message_id=1, recipient="ada@example.com", when=NOW)
    return json.dumps(evil.notification(event)).encode()


SNS_CASES = {
    "forged signature": (_forged_sns, 403, True),
    "tampered body": (_tampered_sns, 403, True),
    "stale timestamp": (lambda k: ses_body(k, timestamp=NOW - timedelta(hours=2)), 400, False),
    "foreign TopicArn": (lambda k: ses_body(k, topic_arn=FOREIGN_TOPIC), 403, False),
    "non-AWS SigningCertURL": (_foreign_cert_url, 403, False),
    "not JSON": (lambda k: b"<xml/>", 400, False),
}


@pytest.mark.parametrize("case", SNS_CASES)
def test_bad_sns_requests_are_refused_with_no_state_change(live_server, webhook_keys, outbound, case):
    build, status, may_read_pinned_cert = SNS_CASES[case]
    response = post(live_server, "/webhooks/ses/", build(webhook_keys))
    assert response.status_code == status, response.text
    assert_nothing_changed(outbound)
    # Certificates are only ever read for an allowlisted topic and an SNS-hosted URL.
    expected = [webhook_keys.sns.cert_url] if may_read_pinned_cert else []
    assert hooks.current_store.requested == expected


def test_bad_sendgrid_requests_are_refused(live_server, webhook_keys, outbound):
    body, headers = sendgrid_request(webhook_keys)
    tampered = body.replace(b"ada@example.com", b"eve@example.com")
    stale_body, stale_headers = sendgrid_request(webhook_keys, timestamp=int(time.time()) - 3600)
    other_signer = type(webhook_keys.sendgrid).generate()
    cases = [
        (tampered, headers, 403),
        (stale_body, stale_headers, 400),
        (body, other_signer.sign(body), 403),  # forged: signed with another key
        (body, {}, 403),  # unsigned
    ]
    for request_body, request_headers, status in cases:
        response = post(live_server, "/webhooks/sendgrid/", request_body, request_headers)
        assert response.status_code == status, response.text
    assert_nothing_changed(outbound)


def test_bad_mailgun_requests_are_refused_and_replays_stopped(live_server, webhook_keys, outbound):
    good = mailgun_request(webhook_keys, token="a" * 50)
    assert post(live_server, "/webhooks/mailgun/", good).status_code == 200
    WebhookDelivery.objects.all().delete()
    forged = json.loads(mailgun_request(webhook_keys))
    forged["signature"]["signature"] = "0" * 64
    # Mailgun signs timestamp + token only (not the body): "tampering" means reusing a captured
    # signature, which the replay guard and the token check below refuse.
    cases = [
        (good, 403),  # replayed token
        (json.dumps(forged).encode(), 403),  # forged signature
        (mailgun_request(webhook_keys, timestamp=int(time.time()) - 3600), 400),  # stale
    ]
    for body, status in cases:
        response = post(live_server, "/webhooks/mailgun/", body)
        assert response.status_code == status, response.text
    assert_nothing_changed(outbound)


def test_mailgun_signature_reused_with_another_token_is_refused(live_server, webhook_keys, outbound):
    payload = json.loads(mailgun_request(webhook_keys))
    payload["signature"]["token"] = "b" * 50  # signature no longer matches timestamp + token
    assert post(live_server, "/webhooks/mailgun/", json.dumps(payload).encode()).status_code == 403
    assert_nothing_changed(outbound)


def test_subscription_confirmation_only_for_allowlisted_topics(live_server, webhook_keys, outbound):
    foreign = webhook_keys.sns.subscription_confirmation(topic_arn="arn:aws:sns:us-east-1:999999999999:evil")
    response = post(live_server, "/webhooks/ses/", json.dumps(foreign).encode())
    assert response.status_code == 403
    assert hooks.confirmed == [] and hooks.current_store.requested == [] and outbound == []
    ours = webhook_keys.sns.subscription_confirmation()
    response = post(live_server, "/webhooks/ses/", json.dumps(ours).encode())
    assert response.status_code == 200, response.text
    assert hooks.confirmed == [ours["SubscribeURL"]]
    assert WebhookDelivery.objects.get().kind == "subscription_confirmation"


def test_storage_failure_answers_503_and_the_retry_is_accepted(live_server, webhook_keys, outbound):
    body = mailgun_request(webhook_keys, token="c" * 50)
    table = WebhookDelivery._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
    try:
        response = post(live_server, "/webhooks/mailgun/", body)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table}_away RENAME TO {table}")
    assert response.status_code == 503
    # Mailgun retries the same request (same token): it must not read as a replay.
    assert post(live_server, "/webhooks/mailgun/", body).status_code == 200
    assert WebhookDelivery.objects.count() == 1


def test_each_provider_signed_over_http_then_processed(live_server, webhook_keys, outbound):
    ses_msg, sg_msg, mg_msg = sent_messages(3)
    when = NOW
    for kind in ("Delivery", "Open", "Click"):
        event = samples.ses_event(kind, message_id=ses_msg.id, recipient=ses_msg.recipient, when=when)
        body = json.dumps(webhook_keys.sns.notification(event)).encode()
        assert post(live_server, "/webhooks/ses/", body).status_code == 200
    sg = [samples.sendgrid_event(k, message_id=sg_msg.id, recipient=sg_msg.recipient, when=when,
                                 event_id=f"sg-{k}-{sg_msg.id}") for k in ("open", "delivered", "spamreport")]
    body = json.dumps(sg).encode()
    assert post(live_server, "/webhooks/sendgrid/", body, webhook_keys.sendgrid.sign(body)).status_code == 200
    for kind in ("delivered", "failed"):
        data = samples.mailgun_event_data(kind, message_id=mg_msg.id, recipient=mg_msg.recipient, when=when,
                                          event_id=f"mg-{kind}-{mg_msg.id}")
        body = mailgun_body(webhook_keys.mailgun_key, data)
        assert post(live_server, "/webhooks/mailgun/", body).status_code == 200
    for delivery_id in WebhookDelivery.objects.order_by("id").values_list("id", flat=True):
        webhook_delivery_process(delivery_id=delivery_id)
    rows = EmailMessage.objects.filter(pk__in=[ses_msg.pk, sg_msg.pk, mg_msg.pk])
    statuses = dict(rows.values_list("id", "status"))
    assert statuses == {ses_msg.id: "CLICKED", sg_msg.id: "COMPLAINED", mg_msg.id: "BOUNCED"}
    assert set(Suppression.objects.values_list("email", flat=True)) == {sg_msg.recipient, mg_msg.recipient}
    assert EmailEvent.objects.count() == 8

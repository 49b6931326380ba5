"""Stored webhook deliveries: processed once, failures recorded, lost tasks re-published."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import EmailMessage
from feedback.models import EmailEvent, WebhookDelivery
from feedback.services.webhooks import (
    webhook_deliveries_requeue,
    webhook_delivery_process,
    webhook_delivery_store,
)
from notifier.celery import app as celery_app
from tests.feedback import samples
from tests.feedback.helpers import T0, sent_messages

pytestmark = pytest.mark.django_db


def sendgrid_delivery(message: EmailMessage) -> WebhookDelivery:
    events = [samples.sendgrid_event(k, message_id=message.id, recipient=message.recipient, when=T0,
                                     event_id=f"e-{k}-{message.id}") for k in ("delivered", "open")]
    return webhook_delivery_store(provider="sendgrid", body=json.dumps(events).encode())


def test_a_delivery_is_processed_once():
    (message,) = sent_messages(1)
    delivery = sendgrid_delivery(message)
    report = webhook_delivery_process(delivery_id=delivery.id)
    assert (report.total, report.new, report.unknown) == (2, 2, 0)
    assert webhook_delivery_process(delivery_id=delivery.id) is None  # redelivered task
    delivery.refresh_from_db()
    assert (delivery.status, delivery.events_new) == ("processed", 2)
    assert EmailMessage.objects.get(pk=message.pk).status == "OPENED"
    assert EmailEvent.objects.count() == 2


def test_each_provider_format_is_processed_end_to_end():
    ses_msg, mg_msg = sent_messages(2)
    complaint = samples.ses_event("Complaint", message_id=ses_msg.id, recipient=ses_msg.recipient, when=T0)
    sns = {"Type": "Notification", "MessageId": "sns-1", "TopicArn": "arn:x",
           "Timestamp": "2026-01-01T12:00:00.000Z", "Message": json.dumps(complaint)}
    mailgun = {"signature": {}, "event-data": samples.mailgun_event_data(
        "failed", message_id=mg_msg.id, recipient=mg_msg.recipient, when=T0, event_id="mg-1")}
    for provider, payload in (("ses", sns), ("mailgun", mailgun)):
        delivery = webhook_delivery_store(provider=provider, body=json.dumps(payload).encode())
        webhook_delivery_process(delivery_id=delivery.id)
    assert EmailMessage.objects.get(pk=ses_msg.pk).status == "COMPLAINED"
    assert EmailMessage.objects.get(pk=mg_msg.pk).status == "BOUNCED"


def test_a_malformed_stored_body_is_marked_failed_not_retried_forever():
    delivery = webhook_delivery_store(provider="sendgrid", body=b'[{"event": "delivered"}]')
    assert webhook_delivery_process(delivery_id=delivery.id).total == 0
    assert webhook_delivery_process(delivery_id=delivery.id) is None  # not pending any more
    delivery.refresh_from_db()
    assert delivery.status == "failed"
    assert "missing" in delivery.error  # the normaliser names the missing field


def test_pending_deliveries_whose_task_was_lost_are_published_again(purged_queues):
    (message,) = sent_messages(1)
    old, fresh = sendgrid_delivery(message), sendgrid_delivery(message)
    WebhookDelivery.objects.filter(pk=old.pk).update(received_at=timezone.now() - timedelta(minutes=5))
    celery_app.control.purge()
    assert webhook_deliveries_requeue(older_than_seconds=60) == 1
    with celery_app.connection_for_read() as conn:
        queued = conn.default_channel.client.llen("email-webhook")
    assert queued == 1
    assert fresh.status == "pending"


def test_single_event_deliveries_are_coalesced_into_one_batch():
    messages = sent_messages(30)
    deliveries = []
    for m in messages:
        data = samples.mailgun_event_data("delivered", message_id=m.id, recipient=m.recipient, when=T0,
                                          event_id=f"mg-d-{m.id}")
        body = json.dumps({"signature": {}, "event-data": data}).encode()
        deliveries.append(webhook_delivery_store(provider="mailgun", body=body))
    report = webhook_delivery_process(delivery_id=deliveries[5].id)
    assert (report.total, report.new) == (30, 30)
    rows = WebhookDelivery.objects.values_list("status", "events_total", "events_new")
    assert set(rows) == {("processed", 1, 1)}
    assert all(webhook_delivery_process(delivery_id=d.id) is None for d in deliveries)
    assert EmailMessage.objects.filter(status="DELIVERED").count() == 30


def test_coalescing_respects_the_byte_budget(settings):
    messages = sent_messages(10)
    deliveries = [sendgrid_delivery(m) for m in messages]
    settings.FEEDBACK_WEBHOOK_COALESCE_BYTES = len(deliveries[0].body) * 3 + 10
    report = webhook_delivery_process(delivery_id=deliveries[0].id)
    assert report.total == 6  # three deliveries of two events each
    assert WebhookDelivery.objects.filter(status="pending").count() == 7


def test_one_task_is_published_while_none_has_started(purged_queues):
    from feedback.services.drain import webhook_deliveries_drain, webhook_task_schedule, webhook_task_started

    messages = sent_messages(3)
    deliveries = [sendgrid_delivery(m) for m in messages]
    celery_app.control.purge()
    assert all(webhook_task_schedule(delivery_id=d.id) for d in deliveries)
    with celery_app.connection_for_read() as conn:
        assert conn.default_channel.client.llen("email-webhook") == 1  # the first one only
    webhook_task_started()  # the task starts: a row committed now gets a new task
    later = sendgrid_delivery(messages[0])
    webhook_task_schedule(delivery_id=later.id)
    with celery_app.connection_for_read() as conn:
        assert conn.default_channel.client.llen("email-webhook") == 2
    report = webhook_deliveries_drain(delivery_id=deliveries[0].id)
    assert report.total == 8 and not WebhookDelivery.objects.filter(status="pending").exists()

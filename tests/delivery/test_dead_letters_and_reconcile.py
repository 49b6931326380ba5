"""Dead-letter requeue (service, command, admin action) and AMBIGUOUS reconciliation."""

from __future__ import annotations

import base64
import json
import uuid
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from delivery.models import DeadLetter, EmailMessage
from delivery.services import ledger
from delivery.services.dead_letters import dead_letter_requeue, messages_dead_letter
from delivery.services.reconcile import message_reconcile
from notifier.celery import app as celery_app
from tests.factories import email_message, template_version

Status = EmailMessage.Status
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _purge():
    celery_app.control.purge()
    yield
    celery_app.control.purge()


def _dead(n: int) -> list[DeadLetter]:
    version = template_version()
    out = []
    for _ in range(n):
        message = email_message(version=version)
        token = uuid.uuid4().hex
        ledger.messages_claim(message_ids=[message.id], token=token)
        messages_dead_letter(message_ids=[message.id], token=token, error="sendgrid 500 boom")
        out.append(DeadLetter.objects.get(message=message))
    return out


def _queued_ids() -> list[int]:
    """Message ids in the tasks waiting on the P0 queue (the broker is real Redis)."""
    with celery_app.connection_for_write() as conn:
        raw = conn.default_channel.client.lrange("email-send-p0", 0, -1)
    ids = []
    for item in raw:
        args = json.loads(base64.b64decode(json.loads(item)["body"]))[0]
        ids.extend(args[0])
    return ids


def test_requeue_is_exactly_once():
    [dead] = _dead(1)
    assert EmailMessage.objects.get(id=dead.message_id).status == Status.FAILED
    assert dead_letter_requeue(dead_letter_id=dead.id) is True
    assert dead_letter_requeue(dead_letter_id=dead.id) is False
    message = EmailMessage.objects.get(id=dead.message_id)
    assert (message.status, message.attempts) == (Status.QUEUED, 0)
    assert _queued_ids() == [dead.message_id]


def test_command_dry_run_then_requeues_each_once():
    dead = _dead(3)
    out = StringIO()
    call_command("requeue_dead_letters", "--dry-run", stdout=out)
    assert "3 dead letters would be requeued" in out.getvalue()
    assert EmailMessage.objects.filter(status=Status.FAILED).count() == 3
    call_command("requeue_dead_letters", "--batch-size", "2", stdout=out)
    call_command("requeue_dead_letters", stdout=out)  # a re-run does nothing
    assert sorted(_queued_ids()) == sorted(d.message_id for d in dead)
    assert DeadLetter.objects.filter(requeued_at__isnull=True).count() == 0


def test_command_since_filters():
    _dead(1)
    out = StringIO()
    call_command("requeue_dead_letters", "--since", "2999-01-01T00:00:00Z", "--dry-run", stdout=out)
    assert "0 dead letters" in out.getvalue()


def test_admin_requeue_action(client):
    [dead] = _dead(1)
    User.objects.create_superuser("admin", "a@example.com", "pw")
    client.login(username="admin", password="pw")
    url = reverse("admin:delivery_deadletter_changelist")
    response = client.post(url, {"action": "requeue", "_selected_action": [dead.id]})
    assert response.status_code == 302
    assert EmailMessage.objects.get(id=dead.message_id).status == Status.QUEUED
    assert client.get(reverse("admin:delivery_emailmessage_changelist")).status_code == 200
    assert client.get(reverse("admin:delivery_ratelimit_changelist")).status_code == 200


def _ambiguous() -> EmailMessage:
    message = email_message()
    token = uuid.uuid4().hex
    ledger.messages_claim(message_ids=[message.id], token=token)
    ledger.messages_mark_started(message_ids=[message.id], token=token)
    ledger.messages_mark_final(message_ids=[message.id], token=token, status=Status.AMBIGUOUS, error="t/o")
    return message


def test_reconcile_accepted_marks_sent_once():
    message = _ambiguous()
    assert message_reconcile(message_id=message.id, accepted=True, provider="sendgrid",
                             provider_message_id="abc") is True
    row = EmailMessage.objects.get(id=message.id)
    assert (row.status, row.provider, row.provider_message_id) == (Status.SENT, "sendgrid", "abc")
    assert message_reconcile(message_id=message.id, accepted=True, provider="sendgrid") is False


def test_reconcile_not_accepted_sends_again_only_from_ambiguous():
    message = _ambiguous()
    assert message_reconcile(message_id=message.id, accepted=False, provider="sendgrid") is True
    assert EmailMessage.objects.get(id=message.id).status == Status.QUEUED
    assert message_reconcile(message_id=message.id, accepted=False, provider="sendgrid") is False
    assert _queued_ids() == [message.id]

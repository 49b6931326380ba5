"""The admin cannot corrupt the ledger: messages, attempts, dead letters, events, counters and
webhook requests are read-only there (no add, no edit, no delete), and what an operator may do
to them (cancel a message, reconcile an AMBIGUOUS one, requeue a dead letter) is an action that
goes through the ledger's services and reports what it changed and what it left."""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from core.priorities import SEND_QUEUES
from delivery.models import AmbiguityRecord, DeadLetter, DeliveryAttempt, EmailMessage
from delivery.services import ledger
from delivery.services.dead_letters import messages_dead_letter
from feedback.models import CampaignEventCounter, EmailEvent, WebhookDelivery
from notifier.celery import app as celery_app
from tests.factories import email_message, template_version
from tests.feedback.helpers import campaign
from tests.support.broker_messages import send_tasks_waiting

Status = EmailMessage.Status
pytestmark = pytest.mark.django_db(transaction=True)  # the requeues publish after commit
CHANGELIST = "/admin/delivery/emailmessage/"


@pytest.fixture(autouse=True)
def _purge():
    celery_app.control.purge()
    yield
    celery_app.control.purge()


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-123")
    client.force_login(user)
    return client


def _notes(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def _act(client, url: str, action: str, ids: list[int]):
    return client.post(url, {"action": action, "_selected_action": ids}, follow=True)


def _published() -> set[int]:
    return {pk for queue in SEND_QUEUES for ids in send_tasks_waiting(queue).values() for pk in ids}


def test_a_message_cannot_be_edited_added_or_deleted(operator):
    message = email_message(status=Status.SENT, provider="smtp", provider_message_id="<a@x>", attempts=1)
    DeliveryAttempt.objects.create(message=message, provider="smtp", outcome="ACCEPTED")
    url = reverse("admin:delivery_emailmessage_change", args=[message.pk])
    page = operator.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    # Shown, not offered as inputs: no field of the message or of its attempts is a form field.
    assert 'name="status"' not in html and 'name="attempts"' not in html and 'name="context"' not in html
    assert "delivery_attempts-0-provider" not in html and "&lt;a@x&gt;" in html
    edit = {"status": "QUEUED", "attempts": "0", "provider_message_id": "", "idempotency_key": "forged",
            "context": "{}", "recipient": "evil@example.com", "priority": "0",
            "delivery_attempts-TOTAL_FORMS": "0", "delivery_attempts-INITIAL_FORMS": "1"}
    assert operator.post(url, edit).status_code == 403
    assert operator.get(reverse("admin:delivery_emailmessage_add")).status_code == 403
    assert operator.post(reverse("admin:delivery_emailmessage_delete", args=[message.pk]),
                         {"post": "yes"}).status_code == 403
    after = EmailMessage.objects.get(pk=message.pk)
    fields = ("status", "attempts", "provider_message_id", "idempotency_key", "recipient", "context")
    assert [getattr(after, f) for f in fields] == [getattr(message, f) for f in fields]
    assert DeliveryAttempt.objects.filter(message=message).count() == 1
    # The list offers the operator actions, no bulk delete, and no Add button.
    listing = operator.get(CHANGELIST).content.decode()
    assert 'value="cancel"' in listing and 'value="delete_selected"' not in listing
    assert reverse("admin:delivery_emailmessage_add") not in listing


@pytest.mark.parametrize("model", [EmailMessage, DeadLetter, AmbiguityRecord, EmailEvent,
                                   CampaignEventCounter, WebhookDelivery])
def test_tables_only_the_system_writes_have_no_add_or_delete(operator, model):
    name = f"admin:{model._meta.app_label}_{model._meta.model_name}"
    assert operator.get(reverse(f"{name}_add")).status_code == 403
    listing = operator.get(reverse(f"{name}_changelist"))
    assert listing.status_code == 200
    assert reverse(f"{name}_add") not in listing.content.decode()
    assert 'value="delete_selected"' not in listing.content.decode()


def test_cancel_action_cancels_only_what_has_not_left(operator):
    version = template_version()
    queued = email_message(version=version)
    scheduled = email_message(version=version, status=Status.SCHEDULED, scheduled_for=timezone.now())
    claimed = email_message(version=version)
    ledger.messages_claim(message_ids=[claimed.pk], token="t-claimed")  # claimed, not handed over
    handed = email_message(version=version)
    ledger.messages_claim(message_ids=[handed.pk], token="t-handed")
    ledger.messages_mark_started(message_ids=[handed.pk], token="t-handed", provider="smtp")
    sent = email_message(version=version, status=Status.SENT)
    ids = [queued.pk, scheduled.pk, claimed.pk, handed.pk, sent.pk]
    response = _act(operator, CHANGELIST, "cancel", ids)
    statuses = dict(EmailMessage.objects.filter(pk__in=ids).values_list("pk", "status"))
    assert statuses == {queued.pk: Status.CANCELLED, scheduled.pk: Status.CANCELLED,
                        claimed.pk: Status.CANCELLED, handed.pk: Status.SENDING, sent.pk: Status.SENT}
    assert EmailMessage.objects.get(pk=queued.pk).error == "cancelled by root in the admin"
    # The worker holding the claim finds its token gone at the hand-off mark: nothing is sent.
    assert not ledger.messages_mark_started(message_ids=[claimed.pk], token="t-claimed").started
    notes = _notes(response)
    assert f"3 cancelled: #{queued.pk}, #{scheduled.pk}, #{claimed.pk}." in notes
    assert (f"2 left unchanged (already handed to a provider or finished): #{handed.pk}, #{sent.pk}."
            in notes)


def _ambiguous(version) -> EmailMessage:
    message = email_message(version=version)
    ledger.messages_claim(message_ids=[message.pk], token=f"t{message.pk}")
    ledger.messages_mark_started(message_ids=[message.pk], token=f"t{message.pk}", provider="sendgrid")
    ledger.stalled_sends_mark_ambiguous(started_before=timezone.now())
    return EmailMessage.objects.get(pk=message.pk)


def test_reconcile_actions_settle_ambiguous_rows_through_the_ledger(operator):
    version = template_version()
    accepted, never, in_flight = _ambiguous(version), _ambiguous(version), email_message(version=version)
    assert accepted.status == never.status == Status.AMBIGUOUS
    ledger.messages_claim(message_ids=[in_flight.pk], token="t-flight")
    ledger.messages_mark_started(message_ids=[in_flight.pk], token="t-flight", provider="smtp")

    # A row still SENDING after its hand-off is the worker's, not the operator's to settle.
    response = _act(operator, CHANGELIST, "reconcile_accepted", [accepted.pk, in_flight.pk])
    assert EmailMessage.objects.get(pk=accepted.pk).status == Status.SENT
    assert EmailMessage.objects.get(pk=in_flight.pk).status == Status.SENDING
    assert AmbiguityRecord.objects.filter(message_id=accepted.pk, kind="settled", reason="operator").exists()
    assert _notes(response) == [f"1 marked SENT: #{accepted.pk}.",
                                f"1 left unchanged (not AMBIGUOUS): #{in_flight.pk}."]

    response = _act(operator, CHANGELIST, "reconcile_not_accepted", [never.pk, accepted.pk])
    assert EmailMessage.objects.get(pk=never.pk).status == Status.QUEUED
    assert EmailMessage.objects.get(pk=accepted.pk).status == Status.SENT
    assert AmbiguityRecord.objects.filter(message_id=never.pk, kind="requeued", reason="operator").exists()
    assert never.pk in _published() and accepted.pk not in _published()
    assert _notes(response) == [f"1 queued to be sent again: #{never.pk}.",
                                f"1 left unchanged (not AMBIGUOUS): #{accepted.pk}."]


def test_requeue_action_sends_a_dead_letter_again_once(operator):
    message = email_message()
    token = uuid.uuid4().hex
    ledger.messages_claim(message_ids=[message.pk], token=token)
    messages_dead_letter(message_ids=[message.pk], token=token, error="sendgrid 500 boom")
    dead = DeadLetter.objects.get(message=message)
    url = reverse("admin:delivery_deadletter_changelist")
    assert operator.post(reverse("admin:delivery_deadletter_change", args=[dead.pk]),
                         {"final_error": "edited", "requeued_at": ""}).status_code == 403

    response = _act(operator, url, "requeue", [dead.pk])
    assert EmailMessage.objects.get(pk=message.pk).status == Status.QUEUED
    assert _published() == {message.pk}
    assert _notes(response) == [f"1 dead letters requeued: #{dead.pk}."]
    again = _act(operator, url, "requeue", [dead.pk])
    assert _notes(again) == [
        f"1 left unchanged (requeued before, or the message is no longer FAILED): #{dead.pk}."]
    assert DeadLetter.objects.get(pk=dead.pk).final_error == "sendgrid 500 boom"


def test_actions_need_the_change_permission(client):
    """A staff member who may only view messages sees them, and no action that changes one."""
    viewer = get_user_model().objects.create_user("viewer", password="pw-view-123", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_emailmessage"))
    client.force_login(viewer)
    message = email_message()
    listing = client.get(CHANGELIST)
    assert listing.status_code == 200 and 'value="cancel"' not in listing.content.decode()
    client.post(CHANGELIST, {"action": "cancel", "_selected_action": [message.pk]})
    assert EmailMessage.objects.get(pk=message.pk).status == Status.QUEUED


def test_admin_names_read_well(operator):
    index = operator.get("/admin/").content.decode()
    assert "Webhook requests" in index and "deliverys" not in index.lower()
    assert "Provider event coverage<" in index
    # The library's own key model is not where keys are made: a service's API keys are.
    assert "/admin/rest_framework_api_key/" not in index
    assert "Services and keys" in index and "API keys" in index and "Services<" in index


def test_campaign_page_names_the_service_not_its_id(operator):
    c = campaign(audience={"type": "list", "list_id": 7})
    c.audience["client_id"] = c.client_id
    c.save(update_fields=["audience"])
    html = operator.get(reverse("admin:campaigns_campaign_change", args=[c.pk])).content.decode()
    line = re.search(r'field-audience_summary.*?<div class="readonly">(.*?)</div>', html, re.S).group(1)
    assert line == "type=list, list_id=7; contacts of service &#x27;test-service&#x27;"

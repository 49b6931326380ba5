"""Campaign rows carry no copy of the contact's data: the send path reads the contact when it
renders (decision 65), so a message renders what the contact holds at send, byte for byte what
the copied context rendered, and a contact deleted since the fan-out is not mailed.

Real PostgreSQL, a real SMTP server on 127.0.0.1, the real fan-out and send paths.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.db import connection

from audience.models import Contact
from campaigns.api.preview import contact_context
from campaigns.models import Campaign
from campaigns.services.fanout import campaign_fanout
from core.priorities import Priority
from delivery.models import EmailMessage
from delivery.providers import get_provider
from delivery.services.ledger import CONTACT_GONE_ERROR
from delivery.services.send_one import message_send_one
from delivery.services.sending import message_batch_send
from templates.rendering import render_for_send
from templates.services import template_create
from tests import factories
from tests.campaigns.helpers import contacts_create

pytestmark = pytest.mark.django_db
MS = EmailMessage.Status


@pytest.fixture
def smtp(smtp_server, settings) -> Iterator:
    settings.NOTIFIER_PROVIDERS = ["smtp"]
    settings.SMTP_PORT = smtp_server.port
    get_provider.cache_clear()
    yield smtp_server.handler
    get_provider.cache_clear()


def _fanned_out(n: int, priority: Priority) -> Campaign:
    """A campaign to user0..user<n-1>, fanned out (rows QUEUED, nothing sent)."""
    contacts_create(n, attributes={"plan": "gold"})
    version = template_create(
        client=factories.owner(), name=f"t-{uuid.uuid4().hex[:6]}", subject="Hi {{ name }}",
        html_body="<p>{{ name }} ({{ email }}, {{ locale }}) is on {{ plan }}, #{{ n }}</p>",
    )
    campaign = Campaign.objects.create(
        name="c", template_version=version, status=Campaign.Status.QUEUED, priority=priority,
        audience={"client_id": factories.owner().pk, "type": "segment",
                  "definition": {"conditions": [{"attribute": "n", "op": "lt", "value": n}]}},
    )
    assert campaign_fanout(campaign_id=campaign.pk).inserted == n
    return campaign


def _send(campaign: Campaign) -> list[int]:
    ids = list(EmailMessage.objects.filter(campaign=campaign).order_by("id").values_list("id", flat=True))
    if campaign.priority <= Priority.HIGH:
        for pk in ids:
            message_send_one(message_id=pk, token=uuid.uuid4().hex)
    else:
        message_batch_send(message_ids=ids, token=uuid.uuid4().hex, priority=campaign.priority)
    return ids


def _part(message, subtype: str) -> str:
    part = next(p for p in message.walk() if p.get_content_type() == f"text/{subtype}")
    return part.get_payload(decode=True).decode("utf-8")


@pytest.mark.parametrize("priority", [Priority.HIGH, Priority.NORMAL, Priority.LOW])
def test_a_campaign_message_renders_its_contact_as_read_at_send(smtp, priority):
    """Fails without the send path's read of the contact: the row's own context is {} and
    `{{ name }}` would not render. HIGH goes through send_one, NORMAL the classic batch path,
    LOW the bulk path that reads rows before its claim."""
    campaign = _fanned_out(4, priority)
    rows = EmailMessage.objects.filter(campaign=campaign)
    assert all(context == {} for context in rows.values_list("context", flat=True))
    renamed = {"name": "Renamed", "attributes": {"plan": "free", "n": 1}}
    Contact.objects.filter(email="user1@example.com").update(**renamed)
    _send(campaign)
    assert set(rows.values_list("status", flat=True)) == {MS.SENT}
    received = {m["To"]: m for m in smtp.messages}
    assert len(received) == 4
    for contact in Contact.objects.filter(email__in=received):
        # Byte for byte what the fan-out's copied context rendered (its SQL built this dict).
        expected = render_for_send(campaign.template_version, contact_context(contact))
        message = received[contact.email]
        assert (message["Subject"], _part(message, "html"), _part(message, "plain")) == (
            expected.subject, expected.html, expected.text)
    assert received["user1@example.com"]["Subject"] == "Hi Renamed"
    assert "Renamed (user1@example.com, en) is on free, #1" in _part(received["user1@example.com"], "html")


@pytest.mark.parametrize("priority", [Priority.HIGH, Priority.NORMAL, Priority.LOW])
def test_a_contact_deleted_after_the_fanout_is_not_mailed(smtp, priority):
    campaign = _fanned_out(3, priority)
    rows = {m.recipient: m.id for m in EmailMessage.objects.filter(campaign=campaign)}
    # Through Django (admin, shell): its unsent rows are suppressed before SET NULL clears them.
    Contact.objects.get(email="user0@example.com").delete()
    assert EmailMessage.objects.get(id=rows["user0@example.com"]).status == MS.SUPPRESSED
    # Behind Django's back (raw SQL): the row keeps a contact id no contact has.
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {Contact._meta.db_table} WHERE email = 'user1@example.com'")
    _send(campaign)
    status = dict(EmailMessage.objects.filter(campaign=campaign).values_list("recipient", "status"))
    assert status == {"user0@example.com": MS.SUPPRESSED, "user1@example.com": MS.SUPPRESSED,
                      "user2@example.com": MS.SENT}
    assert [m["To"] for m in smtp.messages] == ["user2@example.com"]
    assert EmailMessage.objects.get(id=rows["user0@example.com"]).error == CONTACT_GONE_ERROR
    if priority > Priority.HIGH:  # send_one records any unsendable row as "suppressed"
        assert EmailMessage.objects.get(id=rows["user1@example.com"]).error == CONTACT_GONE_ERROR

"""What a service reads after its retentions (issue 30, decision 120): the message log's
`recipient` filter still finds a message stripped of its address (its keyed hash, by an index),
and so do the admin's search and a contact's campaign rows; a stripped message shows no
recipient; messages and events older than the metadata retention of their stream are hidden
from GET /api/v1/messages, /messages/{id}, /messages/{id}/events and /api/v1/events."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from audience.models import Contact, Stream
from clients.personal_data import personal_data_expire
from core.personal_data import recipient_hash
from delivery.models import EmailMessage
from eventlog.models import ServiceEvent
from tests import factories

pytestmark = pytest.mark.django_db
Status = EmailMessage.Status


def _message(days: float, **fields) -> EmailMessage:
    owner = factories.owner()
    message = factories.email_message(version=factories.template_version(client=owner), client=owner,
                                      status=Status.DELIVERED, **fields)
    EmailMessage.objects.filter(pk=message.pk).update(created_at=timezone.now() - timedelta(days=days))
    return message


def _ids(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def test_the_log_finds_a_stripped_message_by_its_address(api, settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    stripped = _message(8, recipient="Ada@Example.com")
    kept = _message(1, recipient="ada@example.com")
    _message(8, recipient="grace@example.com")
    contact = Contact.objects.create(client=factories.owner(), email="ada@example.com")
    fanned = _message(9, recipient="ada@example.com", contact=contact, stream=Stream.BROADCAST)
    personal_data_expire()
    assert EmailMessage.objects.get(pk=stripped.pk).recipient == ""
    assert EmailMessage.objects.get(pk=fanned.pk).recipient == ""
    found = _ids(api.get("/api/v1/messages", {"recipient": "ADA@example.com"}))
    assert found == [kept.pk, stripped.pk, fanned.pk]
    row = api.get(f"/api/v1/messages/{stripped.pk}").json()
    assert row["recipient"] is None and row["personal_data_removed_at"] is not None
    assert api.get(f"/api/v1/messages/{kept.pk}").json()["personal_data_removed_at"] is None
    # Support's look-up: the admin's exact search by address.
    admin = api.__class__()
    admin.force_login(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    page = admin.get("/admin/delivery/emailmessage/", {"q": "ada@example.com"}).content.decode()
    assert all(f"/admin/delivery/emailmessage/{m.pk}/change/" in page for m in (stripped, kept, fanned))


def test_the_hash_branch_reads_its_own_index():
    """On a table with rows (10,000 stripped, analyzed), the look-up by hash is one range of
    msg_client_recipient_hash_idx, newest first, stopped at the page."""
    owner = factories.owner()
    template = _message(30)
    table = EmailMessage._meta.db_table
    columns = [f.column for f in EmailMessage._meta.concrete_fields if f.column not in ("id",)]
    listed = ", ".join(columns)
    copied = (listed.replace("idempotency_key", "idempotency_key || g")
              .replace("recipient_hash", "sha256(g::text::bytea)")
              .replace("personal_data_removed_at", "now()"))
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({listed}) SELECT {copied} FROM {table}, "
                       f"generate_series(1, 10000) g WHERE id = %s", [template.pk])
        cursor.execute(f"ANALYZE {table}")
        sql, params = (EmailMessage.objects.filter(client_id=owner.pk, contact__isnull=True,
                                                   recipient_hash=recipient_hash("ada@example.com"))
                       .order_by("-created_at", "-id")[:51].query.sql_with_params())
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # The week's partition is read through the hash index; a Sort may then order the one row
    # each partition's estimate gives (with a LIMIT over many matches the partitions' index
    # orders are merged instead), and an empty week ahead may be "scanned" at no cost.
    assert "Index Scan using msg_client_recipient_hash_idx_" in plan, plan
    assert re.search(r"Seq Scan on \w+ \w+\s+\(cost=0\.00\.\.0\.00", plan) or "Seq Scan" not in plan, plan


def test_messages_and_events_past_the_metadata_retention_are_hidden(api):
    owner = factories.owner()
    owner.retention = {"broadcast": {"personal_data_days": 5, "metadata_days": 10},
                       "transactional": {"metadata_days": 30}}
    owner.save()
    old_news = _message(12, stream=Stream.BROADCAST)
    old_otp = _message(12)
    ancient_otp = _message(31)
    shown = {old_otp.pk}
    assert _ids(api.get("/api/v1/messages")) == [old_otp.pk]
    for hidden in (old_news, ancient_otp):
        assert api.get(f"/api/v1/messages/{hidden.pk}").status_code == 404
        assert api.get(f"/api/v1/messages/{hidden.pk}/events").status_code == 404
    assert all(api.get(f"/api/v1/messages/{pk}").status_code == 200 for pk in shown)
    assert _ids(api.get("/api/v1/messages", {"recipient": old_news.recipient})) == []



@pytest.mark.django_db(transaction=True)
def test_events_past_the_metadata_retention_of_their_stream_are_hidden(api):
    owner = factories.owner()
    owner.retention = {"broadcast": {"personal_data_days": 5, "metadata_days": 10},
                       "transactional": {"metadata_days": 30}}
    owner.save()

    def logged(days: float, stream: str | None) -> ServiceEvent:
        event = ServiceEvent.objects.create(service=owner, type="message.sent", message_id=1,
                                            occurred_at=timezone.now(), data={"stream": stream})
        ServiceEvent.objects.filter(pk=event.pk).update(recorded_at=timezone.now() - timedelta(days=days))
        return event

    logged(12, "broadcast")
    logged(31, "transactional")
    visible = [logged(12, "transactional"), logged(1, "broadcast")]
    read: list[str] = []
    query: dict = {}
    deadline = time.monotonic() + 60  # the horizon is the cluster's oldest running transaction
    while len(read) < len(visible) and time.monotonic() < deadline:
        body = api.get("/api/v1/events", query).json()
        read += [event["id"] for event in body["events"]]
        query = {"after": body["next"]}
        time.sleep(0 if body["events"] else 0.05)
    assert read == [str(event.pk) for event in visible]

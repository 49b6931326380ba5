"""The audience models moved out of campaigns without losing a row (audience migrations 0001-0002)."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.support.migrations import latest_migrations, migrate_to

BEFORE = [("campaigns", "0004_campaign_audience_size"), ("delivery", "0006_scheduled_messages_index")]


@pytest.mark.django_db(transaction=True)
def test_contacts_lists_and_suppressions_survive_the_move():
    old = migrate_to(BEFORE)
    contact = old.get_model("campaigns", "Contact").objects.create(email="kept@example.com", name="Kept")
    members = old.get_model("campaigns", "ContactList").objects.create(name="kept-list")
    members.contacts.add(contact)
    old.get_model("campaigns", "Suppression").objects.create(email="gone@example.com", reason="complaint")

    latest = migrate_to(latest_migrations())

    moved = latest.get_model("audience", "Contact").objects.get(email="kept@example.com")
    assert moved.name == "Kept" and moved.pk == contact.pk
    assert list(latest.get_model("audience", "ContactList").objects.get(name="kept-list")
                .contacts.values_list("email", flat=True)) == ["kept@example.com"]
    suppression = latest.get_model("audience", "Suppression").objects.get(email="gone@example.com")
    assert suppression.reason == "complaint"
    tables = set(connection.introspection.table_names())
    assert {"audience_contact", "audience_contactlist_contacts", "audience_suppression"} <= tables
    assert not {t for t in tables if t.startswith("campaigns_") and t != "campaigns_campaign"}

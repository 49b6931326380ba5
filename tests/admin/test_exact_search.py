"""The admin's exact search on big tables is an index lookup (decision 64): Django's `=` search
is `UPPER(col) = UPPER(term)`, which no plain index serves, so it scanned every message row."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.db import connection
from django.test import RequestFactory

from audience.models import Contact
from delivery.models import EmailMessage
from tests.factories import email_message, owner, template_version

pytestmark = pytest.mark.django_db


def _search(term: str):
    model_admin = admin.site._registry[EmailMessage]
    queryset, _ = model_admin.get_search_results(RequestFactory().get("/"), EmailMessage.objects.all(), term)
    return queryset


def test_a_search_by_address_finds_the_rows_it_names_in_either_case():
    version = template_version()
    given = email_message(version=version, recipient="Later@Example.com", idempotency_key="k1")
    lower = email_message(version=version, recipient="person7@example.com", idempotency_key="k2")
    email_message(version=version, recipient="someone@example.com", idempotency_key="k3")
    assert [m.id for m in _search("Later@Example.com")] == [given.id]
    assert [m.id for m in _search(" Person7@Example.com ")] == [lower.id]
    assert [m.id for m in _search("k3")] != []  # the idempotency key is searched too


def test_a_contacts_rows_are_found_by_its_address_without_the_recipient_index():
    """Fan-out rows (a contact's, recipient = its lower-cased address) are not in the recipient
    index (decision 64): the search finds them through the contact."""
    version = template_version()
    contact = Contact.objects.create(client=owner(), email="fan@example.com")
    fanned = email_message(version=version, recipient="fan@example.com", contact=contact,
                           idempotency_key="c:1:1")
    email_message(version=version, recipient="other@example.com", idempotency_key="c:1:2")
    assert [m.id for m in _search("Fan@Example.com")] == [fanned.id]


def test_a_search_by_address_reads_an_index_not_the_table():
    version = template_version()
    for n in range(20):
        contact = Contact.objects.create(client=owner(), email=f"fan{n}@example.com")
        email_message(version=version, recipient=f"user{n}@example.com", idempotency_key=f"k{n}")
        email_message(version=version, recipient=contact.email, contact=contact, idempotency_key=f"f{n}")
    sql, params = _search("user3@example.com").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {EmailMessage._meta.db_table}")
        cursor.execute(f"ANALYZE {Contact._meta.db_table}")
        cursor.execute("SET LOCAL enable_seqscan TO off")  # as on a table of millions
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Seq Scan" not in plan, plan

"""manage.py import_contacts: COPY-based upsert, list membership, dry run, resume."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from audience.models import Contact, ContactImport, ContactList
from tests import factories

# The importer writes from a second thread (its own connection): rows must really commit.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "contacts.csv"
    lines = ["email,name,timezone,plan,orders"]
    lines += [f"P{i}@Example.com,Person {i},Europe/Paris,pro,{i}" for i in range(250)]
    lines += ["not-an-email,Nobody,,,", "p3@example.com,Person Three,,team,"]  # bad; then a repeat
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(path, *args: str) -> str:
    out, err = StringIO(), StringIO()
    owner = factories.owner().name
    call_command("import_contacts", str(path), "--client", owner, *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def _planner_row_estimate(table: str) -> float:
    """pg_class.reltuples: -1 (PostgreSQL 14+) until the table is first analyzed."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [table])
        return cursor.fetchone()[0]


def test_import_upserts_adds_to_list_and_reports_bad_rows(csv_file):
    assert "would write 251" in _run(csv_file, "--dry-run")
    assert not Contact.objects.exists()
    output = _run(csv_file, "--list", "news", "--batch-size", "100")
    assert "252 rows read" in output and "1 invalid" in output and "line 252" in output
    assert Contact.objects.count() == 250
    assert _planner_row_estimate(Contact._meta.db_table) == 250  # ANALYZEd after the load
    three = Contact.objects.get(email="p3@example.com")  # the later row won; attributes merged
    assert (three.name, three.timezone) == ("Person Three", "")
    assert three.attributes == {"plan": "team", "orders": 3}
    assert Contact.objects.get(email="p7@example.com").attributes == {"plan": "pro", "orders": 7}
    assert ContactList.objects.get(name="news").contacts.count() == 250
    assert "skipped" in _run(csv_file) and Contact.objects.count() == 250  # finished: nothing redone


def test_interrupted_import_resumes_after_the_last_committed_batch(csv_file):
    from audience.services.importer import file_fingerprint

    # As if a first run committed two batches of 100 and died.
    fingerprint = file_fingerprint(str(csv_file), factories.owner().pk)
    ContactImport.objects.create(path=str(csv_file), fingerprint=fingerprint, rows_done=200)
    output = _run(csv_file, "--batch-size", "100")
    assert "52 rows read" in output and "200 skipped" in output
    assert Contact.objects.count() == 51  # rows 201..250 plus the repeated p3
    assert ContactImport.objects.get().finished

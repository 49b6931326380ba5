"""import_suppressions, export_events, purge_messages: dry runs, batches, resumption."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from audience.models import Suppression
from delivery.models import DeliveryAttempt, EmailMessage
from feedback.models import EmailEvent
from tests.factories import email_message, template_version

pytestmark = pytest.mark.django_db


def _run(*argv: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*argv, "--quiet", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_import_suppressions_validates_batches_and_is_idempotent(tmp_path):
    csv_file = tmp_path / "list.csv"
    csv_file.write_text("email,reason\nA@example.com,complaint\nb@example.com,\nnot-an-address,\n"
                        "c@example.com%0d%0aBcc: x@example.com,\na@example.com,\nd@example.com,bogus\n")
    out, _ = _run("import_suppressions", str(csv_file), "--dry-run", "--batch-size", "2")
    assert "would import 3" in out and not Suppression.objects.exists()
    out, err = _run("import_suppressions", str(csv_file), "--batch-size", "2")
    assert "invalid 2" in out and "imported 3" in out and "committed through line 3" in err
    assert Suppression.objects.get(email="a@example.com").reason == "complaint"
    assert Suppression.objects.get(email="d@example.com").reason == "manual"
    out, _ = _run("import_suppressions", str(csv_file))          # rerun: nothing new
    assert "imported 0" in out and Suppression.objects.count() == 3


def test_import_suppressions_resumes_from_a_line(tmp_path):
    csv_file = tmp_path / "list.csv"
    csv_file.write_text("email\n" + "".join(f"u{n}@example.com\n" for n in range(10)))
    _run("import_suppressions", str(csv_file), "--start-line", "7")
    assert sorted(Suppression.objects.values_list("email", flat=True)) == \
        [f"u{n}@example.com" for n in range(5, 10)]


def test_import_suppressions_needs_an_email_column(tmp_path):
    csv_file = tmp_path / "bad.csv"
    csv_file.write_text("address\nx@example.com\n")
    with pytest.raises(CommandError, match="email"):
        _run("import_suppressions", str(csv_file))


def _events(count: int) -> list[EmailEvent]:
    message = email_message()
    now = timezone.now()
    return [EmailEvent.objects.create(message=message, provider="ses", provider_event_id=f"e{n}",
                                      event_type="delivered", recipient=message.recipient,
                                      occurred_at=now - timedelta(days=n)) for n in range(count)]


def test_export_events_jsonl_and_csv_since_a_date(tmp_path):
    events = _events(5)
    since = (timezone.now() - timedelta(days=2, hours=12)).isoformat()
    out, err = _run("export_events", "--since", since, "--format", "jsonl", "--batch-size", "2")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [row["provider_event_id"] for row in rows] == ["e0", "e1", "e2"]
    assert [row["id"] for row in rows] == sorted(e.id for e in events[:3])
    assert "exported 3 events" in err
    target = tmp_path / "events.csv"
    _run("export_events", "--since", "2000-01-01", "--format", "csv", "--output", str(target))
    lines = target.read_text().splitlines()
    assert lines[0].startswith("id,message_id") and len(lines) == 6


def test_export_events_resumes_after_the_last_exported_id(tmp_path):
    events = _events(4)
    target = tmp_path / "events.jsonl"
    first_two = sorted(e.id for e in events)[:2]
    target.write_text("".join(json.dumps({"id": pk}) + "\n" for pk in first_two))
    _run("export_events", "--since", "2000-01-01", "--output", str(target), "--resume")
    ids = [json.loads(line)["id"] for line in target.read_text().splitlines()]
    assert ids == sorted(e.id for e in events)          # no gap, no duplicate


def test_export_events_dry_run_counts(tmp_path):
    _events(3)
    _, err = _run("export_events", "--since", "2000-01-01", "--dry-run")
    assert "would export 3" in err


def test_purge_messages_deletes_only_old_final_messages_in_batches():
    version = template_version()
    old = timezone.now() - timedelta(days=40)
    final = [email_message(version=version, status=status) for status in ("SENT", "FAILED", "DELIVERED")]
    in_flight = [email_message(version=version, status=status) for status in ("QUEUED", "SENDING",
                                                                              "AMBIGUOUS")]
    recent = email_message(version=version, status="SENT")
    EmailMessage.objects.filter(id__in=[m.id for m in final + in_flight]).update(created_at=old)
    DeliveryAttempt.objects.create(message=final[0], provider="smtp", outcome="accepted")
    out, _ = _run("purge_messages", "--older-than", "30", "--dry-run")
    assert "would purge 3" in out and EmailMessage.objects.count() == 7
    out, _ = _run("purge_messages", "--older-than", "30", "--batch-size", "2")
    assert "purged 3 messages" in out
    remaining = set(EmailMessage.objects.values_list("id", flat=True))
    assert remaining == {m.id for m in in_flight} | {recent.id}
    assert not DeliveryAttempt.objects.exists()
    out, _ = _run("purge_messages", "--older-than", "30")            # rerun: nothing left
    assert "purged 0 messages" in out

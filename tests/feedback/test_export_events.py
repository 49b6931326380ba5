"""manage.py export_events: JSON lines and CSV since a date, batches, resumption, dry run."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from feedback.models import EmailEvent
from tests.factories import email_message
from tests.support.commands import command_run

pytestmark = pytest.mark.django_db


def _events(count: int) -> list[EmailEvent]:
    message = email_message()
    now = timezone.now()
    return [EmailEvent.objects.create(message=message, provider="ses", provider_event_id=f"e{n}",
                                      event_type="delivered", recipient=message.recipient,
                                      occurred_at=now - timedelta(days=n)) for n in range(count)]


def test_export_events_jsonl_and_csv_since_a_date(tmp_path):
    events = _events(5)
    since = (timezone.now() - timedelta(days=2, hours=12)).isoformat()
    out, err = command_run("export_events", "--since", since, "--format", "jsonl", "--batch-size", "2")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [row["provider_event_id"] for row in rows] == ["e0", "e1", "e2"]
    assert [row["id"] for row in rows] == sorted(e.id for e in events[:3])
    assert "exported 3 events" in err
    target = tmp_path / "events.csv"
    command_run("export_events", "--since", "2000-01-01", "--format", "csv", "--output", str(target))
    lines = target.read_text().splitlines()
    assert lines[0].startswith("id,message_id") and len(lines) == 6


def test_export_events_resumes_after_the_last_exported_id(tmp_path):
    events = _events(4)
    target = tmp_path / "events.jsonl"
    first_two = sorted(e.id for e in events)[:2]
    target.write_text("".join(json.dumps({"id": pk}) + "\n" for pk in first_two))
    command_run("export_events", "--since", "2000-01-01", "--output", str(target), "--resume")
    ids = [json.loads(line)["id"] for line in target.read_text().splitlines()]
    assert ids == sorted(e.id for e in events)          # no gap, no duplicate


def test_export_events_dry_run_counts(tmp_path):
    _events(3)
    _, err = command_run("export_events", "--since", "2000-01-01", "--dry-run")
    assert "would export 3" in err

"""`manage.py expire_data [--as-of] [--batch-size] [--dry-run]` and the scheduler's bounded step
(issue 30, decision 120): a dry run counts what a run would remove as of a given time and
changes nothing; the run removes exactly that, batch by batch; the sweep runs at most once a
minute; the pick of a batch reads the partial index of due rows, never the table."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from clients import personal_data
from clients.personal_data import personal_data_sweep
from delivery.models import EmailMessage
from delivery.services.ledger.personal_data import DUE
from eventlog.models import ServiceEvent
from scheduling import extensions
from tests import factories
from tests.feedback.helpers import sent_messages
from tests.plans import plan_sorts

pytestmark = pytest.mark.django_db
TABLE = EmailMessage._meta.db_table


def _run(*args: str) -> str:
    out = StringIO()
    call_command("expire_data", *args, stdout=out)
    return out.getvalue().strip()


def _stripped() -> int:
    return EmailMessage.objects.filter(personal_data_removed_at__isnull=False).count()


def test_a_dry_run_as_of_a_time_counts_and_changes_nothing_then_the_run_removes_that(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    messages = sent_messages(5)
    EmailMessage.objects.filter(pk__in=[m.pk for m in messages[:3]]).update(
        created_at=timezone.now() - timedelta(days=3))
    ServiceEvent.objects.create(service=factories.owner(), type="message.sent", message_id=messages[0].pk,
                                occurred_at=timezone.now(), data={"recipient": messages[0].recipient,
                                                                  "stream": "transactional"})
    as_of = (timezone.now() + timedelta(days=5)).isoformat()
    assert _run("--dry-run").startswith(
        "would remove personal data from 0 messages, 0 events, 0 esp events, 0 webhook bodies, "
        "0 campaign audiences, 0 schedule definitions (as of ")
    dry = _run("--as-of", as_of, "--dry-run")
    assert dry.startswith("would remove personal data from 3 messages, 0 events"), dry
    assert _stripped() == 0
    assert _run("--as-of", as_of, "--batch-size", "2").startswith("removed personal data from 3 messages")
    assert _stripped() == 3
    later = (timezone.now() + timedelta(days=9)).isoformat()
    dry = _run("--as-of", later, "--dry-run")
    assert dry.startswith("would remove personal data from 2 messages, 1 events"), dry
    assert _run("--as-of", later).startswith("removed personal data from 2 messages, 1 events")
    assert ServiceEvent.objects.get().data["recipient"] is None
    with pytest.raises(CommandError):
        _run("--as-of", "next tuesday")


def test_events_of_a_deleted_service_lose_their_address_under_the_defaults(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 7
    owner = factories.owner()
    owner.retention = {"transactional": {"personal_data_days": 20}}
    owner.save()

    def logged(service_id: str, days: float) -> ServiceEvent:
        event = ServiceEvent.objects.create(service_id=service_id, type="message.sent", message_id=1,
                                            occurred_at=timezone.now(),
                                            data={"recipient": "ada@example.com", "stream": "transactional",
                                                  "error": "550 <ada@example.com> unknown"})
        ServiceEvent.objects.filter(pk=event.pk).update(recorded_at=timezone.now() - timedelta(days=days))
        return event

    gone, kept = logged("svc_deleted_long_ago", 8), logged(owner.pk, 8)
    _run()
    gone.refresh_from_db()
    assert gone.data["recipient"] is None and gone.data["error"] == "550 <[address removed]> unknown"
    kept.refresh_from_db()
    assert kept.data["recipient"] == "ada@example.com"


def test_the_sweep_is_a_bounded_step_at_most_once_a_minute(settings):
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 1
    messages = sent_messages(4)
    EmailMessage.objects.filter(pk__in=[m.pk for m in messages]).update(
        created_at=timezone.now() - timedelta(days=2))
    personal_data._sweep_throttle.reset()
    extensions.run_sweeps()  # registered by scheduling's AppConfig
    assert _stripped() == 4
    EmailMessage.objects.filter(pk=messages[0].pk).update(personal_data_removed_at=None,
                                                          recipient="x@y.example")
    personal_data_sweep()  # within the minute: waits for the next one
    assert _stripped() == 3
    # A step with no time left stops before any batch.
    assert personal_data.personal_data_expire(budget_seconds=0) == {}


def test_a_sweep_that_runs_out_of_time_comes_back_soon(settings, monkeypatch):
    """A backlog: the step after one that spent its whole budget is not a minute away."""
    settings.NOTIFIER_RETENTION_PERSONAL_DAYS = 1
    messages = sent_messages(3)
    EmailMessage.objects.filter(pk__in=[m.pk for m in messages]).update(
        created_at=timezone.now() - timedelta(days=2))
    personal_data._sweep_throttle.reset()
    monkeypatch.setattr(personal_data, "SWEEP_STEP_SECONDS", 0.0)  # out of time before a batch
    monkeypatch.setattr(personal_data, "BACKLOG_EVERY_SECONDS", 0.0)
    personal_data_sweep()
    assert _stripped() == 0
    monkeypatch.setattr(personal_data, "SWEEP_STEP_SECONDS", 1.0)
    personal_data_sweep()  # due again at once: the backlog's pace
    assert _stripped() == 3
    assert not personal_data._sweep_throttle.due()  # that one finished within its step: a minute


def test_the_pick_walks_the_index_of_due_rows():
    """20,000 rows of one service, analyzed, half of them already stripped: the pick is one
    range of msg_personal_due_idx in its order, stopped at the batch (no sort, no table scan)."""
    template = factories.email_message(version=factories.template_version(), client=factories.owner(),
                                       status="SENT")
    columns = [f.column for f in EmailMessage._meta.concrete_fields if f.column != "id"]
    listed = ", ".join(columns)
    copied = (listed.replace("idempotency_key", "idempotency_key || g")
              .replace("personal_data_removed_at", "CASE WHEN g %% 2 = 0 THEN now() END")
              .replace("created_at", "now() - g * interval '1 minute'"))
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {TABLE} ({listed}) SELECT {copied} FROM {TABLE}, "
                       f"generate_series(1, 20000) g WHERE id = %s", [template.pk])
        cursor.execute(f"ANALYZE {TABLE}")
        cursor.execute(f"EXPLAIN SELECT id FROM {TABLE} WHERE client_id = %s AND stream = 'transactional' "
                       f"AND created_at < now() - interval '3 days' AND {DUE} ORDER BY created_at, id "
                       f"LIMIT 1000 FOR UPDATE SKIP LOCKED", [factories.owner().pk])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "msg_personal_due_idx" in plan and not plan_sorts(plan) and "Seq Scan" not in plan, plan

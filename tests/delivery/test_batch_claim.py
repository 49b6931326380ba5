"""A P2 batch claims, reads and probes for its own redelivery in one statement (decision 71).

Real PostgreSQL, Redis and fake ESPs; every send test counts lost and duplicate messages.
"""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from audience.models import Suppression
from delivery.models import EmailMessage
from delivery.services import ledger
from delivery.services.sending import message_batch_send
from tests.delivery.conftest import MessageTableStatements, ledger_counts
from tests.factories import email_message, template_version

Status = EmailMessage.Status
pytestmark = pytest.mark.django_db


def _states(ids: list[int]) -> set[tuple[str, int]]:
    return set(EmailMessage.objects.filter(id__in=ids).values_list("status", "attempts"))


def _messages(n: int, *, priority: int = 2, **fields) -> list[int]:
    version = template_version(html_body="<p>Hi {{ name }}</p>")
    return [email_message(version=version, priority=priority, **fields).id for _ in range(n)]


def test_the_claim_returns_the_rows_as_a_send_reads_them():
    ids = _messages(2)
    suppressed = email_message(version=template_version(), priority=2, recipient="gone@example.com").id
    Suppression.objects.create(email="gone@example.com", reason="hard_bounce")
    rows = ledger.messages_claim_for_send(message_ids=[*ids, suppressed], token="a")
    assert [(m.id, m.attempts, m.suppressed) for m in rows] == [(ids[0], 1, False), (ids[1], 1, False),
                                                                (suppressed, 1, True)]
    assert rows[0].recipient == EmailMessage.objects.get(id=ids[0]).recipient
    assert set(EmailMessage.objects.filter(id__in=ids).values_list("status", "claim_token")) == {
        (Status.SENDING, "a")}
    assert ledger.messages_claim_for_send(message_ids=ids, token="b") == []
    # The same batch redelivered before its hand-off takes nothing (its caller splits it) ...
    assert ledger.messages_claim_for_send(message_ids=ids, token="a") == []
    assert set(EmailMessage.objects.filter(id__in=ids).values_list("attempts", flat=True)) == {1}
    # ... one row is re-taken, counting the attempt, until it is handed over.
    assert [m.attempts for m in ledger.messages_claim_for_send(message_ids=ids[:1], token="a")] == [2]
    ledger.messages_mark_started(message_ids=ids[:1], token="a")
    assert ledger.messages_claim_for_send(message_ids=ids[:1], token="a") == []


def test_a_first_p2_delivery_touches_the_message_table_three_times(settings, esps):
    """Claim with its read and its redelivery probe, the hand-off mark, SENT (five before)."""
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    ids = _messages(20)
    statements = MessageTableStatements()
    with connection.execute_wrapper(statements):
        report = message_batch_send(message_ids=ids, token=uuid.uuid4().hex, priority=2)
    assert report.sent == 20
    assert len(statements.sql) == 3, statements.sql
    assert ledger_counts(esps, ids) == ([], {}, {})
    assert _states(ids) == {(Status.SENT, 1)}


def test_a_redelivered_p2_batch_is_still_split(settings, esps):
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    ids = _messages(4)
    token = uuid.uuid4().hex
    ledger.messages_claim(message_ids=ids, token=token)  # the delivery that died after its claim
    report = message_batch_send(message_ids=ids, token=token, priority=2)
    assert sorted(report.split_ids) == ids and report.sent == 0
    assert _states(ids) == {(Status.QUEUED, 1)}
    assert ledger_counts(esps, ids) == (ids, {}, {})  # nothing sent yet: the split tasks send

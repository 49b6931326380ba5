"""Bulk (P3) batches claim and hand over in one synchronously committed write (decision 59).

Real PostgreSQL, Redis and fake ESPs; every send test counts lost and duplicate messages.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from audience.models import Suppression
from delivery import signals
from delivery.models import EmailMessage
from delivery.services import ledger
from delivery.services.sending import _first_delivery, message_batch_send
from tests.delivery.conftest import MessageTableStatements, ledger_counts
from tests.factories import email_message, template_version

Status = EmailMessage.Status
pytestmark = pytest.mark.django_db


def _messages(n: int, *, priority: int = 3, html: str = "<p>Hi {{ name }}</p>") -> list[int]:
    version = template_version(html_body=html)
    return [email_message(version=version, priority=priority).id for _ in range(n)]


def test_one_write_claims_and_hands_over_and_no_other_copy_wins_a_row():
    ids = _messages(3)
    won = ledger.messages_claim_hand_off(message_ids=ids, token="a")
    assert won == {pk: (Status.SENDING, 1) for pk in ids}
    rows = EmailMessage.objects.filter(id__in=ids)
    assert all(r.claim_token == "a" and r.send_started_at and r.claimed_at for r in rows)
    assert ledger.messages_claim_hand_off(message_ids=ids, token="b") == {}
    # The same task redelivered cannot re-claim a handed-over row, nor mark it again.
    assert ledger.messages_claim(message_ids=ids, token="a") == []
    assert ledger.messages_mark_started(message_ids=ids, token="a").started == set()


def test_a_crash_after_the_write_leaves_rows_for_reconciliation_never_requeued():
    ids = _messages(2)
    ledger.messages_claim_hand_off(message_ids=ids, token="a")
    later = timezone.now() + timedelta(hours=1)
    assert ledger.stale_claims_release(claimed_before=later) == []
    assert len(ledger.stalled_sends_mark_ambiguous(started_before=later)) == 2


def test_an_address_suppressed_by_then_is_suppressed_in_the_same_write():
    ids = _messages(2)
    EmailMessage.objects.filter(id=ids[0]).update(recipient="Gone@Example.com")
    Suppression.objects.create(email="gone@example.com", reason="hard_bounce")
    won = ledger.messages_claim_hand_off(message_ids=ids, token="a")
    assert won == {ids[0]: (Status.SUPPRESSED, 1), ids[1]: (Status.SENDING, 1)}
    gone = EmailMessage.objects.get(id=ids[0])
    assert (gone.error, gone.send_started_at) == ("suppressed", None)


@pytest.mark.parametrize("priority", [0, 2])
def test_a_suppression_committed_after_the_claim_is_caught_by_the_hand_off_mark(priority):
    """F17 at the claim boundary, for the paths that claim before rendering (P2 batches and P0's
    single message): the claim read the address unsuppressed, the hand-off mark must not hand
    it over (tests/delivery/test_suppression_at_hand_off.py races real workers on it)."""
    ids = _messages(2, priority=priority)
    EmailMessage.objects.filter(id=ids[0]).update(recipient="Late@Example.com")
    if priority == 0:
        claimed = [ledger.message_claim_for_send(message_id=pk, token=f"t{pk}") for pk in ids]
    else:
        claimed = ledger.messages_claim_for_send(message_ids=ids, token="t")
    assert [m.suppressed for m in claimed] == [False, False]
    Suppression.objects.create(email="late@example.com", reason="hard_bounce")
    if priority == 0:
        hand_offs = [ledger.message_mark_started(message_id=pk, token=f"t{pk}") for pk in ids]
        suppressed, started = (set().union(*(getattr(h, part) for h in hand_offs))
                               for part in ("suppressed", "started"))
    else:
        hand_off = ledger.messages_mark_started(message_ids=ids, token="t")
        suppressed, started = hand_off.suppressed, hand_off.started
    assert (suppressed, started) == ({ids[0]}, {ids[1]})
    late = EmailMessage.objects.get(id=ids[0])
    assert (late.status, late.error, late.send_started_at) == (Status.SUPPRESSED, "suppressed", None)


def test_a_bulk_batch_sends_with_two_writes_instead_of_three(settings, esps):
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    merged, normal, classic = _messages(20), _messages(20, priority=2), _messages(20)
    writes = {}
    for name, ids, priority in (("merged", merged, 3), ("normal", normal, 2), ("classic", classic, None)):
        counter = MessageTableStatements()
        with connection.execute_wrapper(counter):
            report = message_batch_send(message_ids=ids, token=uuid.uuid4().hex, priority=priority)
        assert report.sent == 20
        writes[name] = counter.updates
    # (claim + hand-off), SENT vs claim, hand-off, SENT: P2 keeps its claim before rendering.
    assert writes == {"merged": 2, "normal": 3, "classic": 3}
    assert ledger_counts(esps, merged + normal + classic) == ([], {}, {})
    rows = EmailMessage.objects.filter(id__in=merged)
    assert {(r.status, r.attempts) for r in rows} == {(Status.SENT, 1)}


def test_a_redelivered_batch_claims_before_rendering(settings, esps):
    """The first delivery wrote nothing (it died rendering): the redelivery takes the classic
    path, whose claim counts the attempt the poison guard reads."""
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    ids = _messages(5)
    token = uuid.uuid4().hex
    assert _first_delivery(token)  # the delivery that died
    seen: list[set[str]] = []

    def statuses_at_claim(sender, *, message_ids, **_):
        seen.append(set(EmailMessage.objects.filter(id__in=message_ids).values_list("status", flat=True)))

    signals.batch_claimed.connect(statuses_at_claim, dispatch_uid="test-statuses-at-claim")
    try:
        report = message_batch_send(message_ids=ids, token=token, priority=3)
        first = message_batch_send(message_ids=_messages(5), token=uuid.uuid4().hex, priority=3)
    finally:
        signals.batch_claimed.disconnect(dispatch_uid="test-statuses-at-claim")
    assert seen == [{Status.SENDING}, {Status.QUEUED}]  # redelivery claimed first; a first did not
    assert (report.sent, first.sent) == (5, 5)
    assert ledger_counts(esps, ids) == ([], {}, {})


def test_a_row_that_fails_to_render_is_failed_with_its_error(settings, esps):
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    good = _messages(3)
    broken = _messages(1, html="{{ lipsum(10**6) }}")
    report = message_batch_send(message_ids=good + broken, token=uuid.uuid4().hex, priority=3)
    assert (report.sent, report.failed) == (3, 1)
    failed = EmailMessage.objects.get(id=broken[0])
    assert failed.status == Status.FAILED and "render failed" in failed.error and failed.attempts == 1
    assert ledger_counts(esps, good) == ([], {}, {})


def test_a_row_at_its_attempt_limit_is_dead_lettered_by_the_classic_path(settings, esps):
    settings.NOTIFIER_PROVIDERS = ["sendgrid"]
    ids = _messages(2)
    EmailMessage.objects.filter(id=ids[0]).update(attempts=8)  # P3 allows 8 claims
    report = message_batch_send(message_ids=ids, token=uuid.uuid4().hex, priority=3)
    assert (report.sent, report.dead_lettered) == (1, 1)
    assert EmailMessage.objects.get(id=ids[0]).status == Status.FAILED

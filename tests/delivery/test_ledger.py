"""The guarded ledger updates that fence double sends."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from delivery.models import EmailMessage
from delivery.services import ledger
from tests.factories import email_message, template_version

Status = EmailMessage.Status
pytestmark = pytest.mark.django_db


@pytest.fixture
def messages():
    version = template_version()
    return [email_message(version=version) for _ in range(3)]


def test_claim_is_exclusive_between_tasks(messages):
    ids = [m.id for m in messages]
    first = ledger.messages_claim(message_ids=ids, token="task-a")
    second = ledger.messages_claim(message_ids=ids, token="task-b")
    assert sorted(pk for pk, _ in first) == sorted(ids)
    assert second == []
    assert set(EmailMessage.objects.values_list("status", flat=True)) == {Status.SENDING}


def test_redelivered_task_reclaims_only_rows_not_yet_handed_over(messages):
    ids = [m.id for m in messages]
    ledger.messages_claim(message_ids=ids, token="task-a")
    assert ledger.messages_mark_started(message_ids=ids[:1], token="task-a").started == {ids[0]}
    again = ledger.messages_claim(message_ids=ids, token="task-a")
    assert sorted(pk for pk, _ in again) == sorted(ids[1:])
    assert dict(again)[ids[1]] == 2  # attempts count every claim: the poison guard reads it


def test_hand_off_is_won_by_one_copy_only(messages):
    ids = [m.id for m in messages]
    ledger.messages_claim(message_ids=ids, token="task-a")
    assert ledger.messages_mark_started(message_ids=ids, token="task-a").started == set(ids)
    assert ledger.messages_mark_started(message_ids=ids, token="task-a").started == set()
    assert ledger.messages_mark_started(message_ids=ids, token="task-b").started == set()


def test_results_only_change_rows_the_token_owns(messages):
    ids = [m.id for m in messages]
    ledger.messages_claim(message_ids=ids, token="task-a")
    assert ledger.messages_mark_sent(provider_ids={ids[0]: "p-1"}, provider="smtp", token="task-b") == 0
    assert ledger.messages_mark_sent(provider_ids={ids[0]: "p-1", ids[1]: "p-2"},
                                     provider="smtp", token="task-a") == 2
    rows = {m.id: m for m in EmailMessage.objects.all()}
    assert (rows[ids[0]].status, rows[ids[0]].provider_message_id) == (Status.SENT, "p-1")
    assert rows[ids[1]].provider_message_id == "p-2"
    assert ledger.messages_release(message_ids=[ids[2]], token="task-a") == 1
    assert EmailMessage.objects.get(id=ids[2]).status == Status.QUEUED


def test_stale_claims_return_to_queue_but_handed_over_rows_become_ambiguous(messages):
    ids = [m.id for m in messages]
    ledger.messages_claim(message_ids=ids, token="task-a")
    ledger.messages_mark_started(message_ids=ids[:1], token="task-a")
    later = timezone.now() + timedelta(seconds=1)
    released = ledger.stale_claims_release(claimed_before=later)
    assert sorted(pk for pk, _ in released) == sorted(ids[1:])
    assert len(ledger.stalled_sends_mark_ambiguous(started_before=later)) == 1
    assert EmailMessage.objects.get(id=ids[0]).status == Status.AMBIGUOUS


def test_orphaned_queued_rows_are_republished_once_per_interval(messages):
    cutoff = timezone.now() + timedelta(seconds=1)
    assert len(ledger.orphaned_messages_claim_requeue(older_than=cutoff)) == 3
    assert ledger.orphaned_messages_claim_requeue(older_than=timezone.now() - timedelta(seconds=60)) == []


def test_poison_message_fails_after_its_attempt_limit_instead_of_looping(messages):
    from delivery.services.sending import message_batch_send

    poison = messages[0]
    EmailMessage.objects.filter(pk=poison.pk).update(attempts=5)  # P0 allows 5 claims
    report = message_batch_send(message_ids=[poison.pk], token="task-z")
    poison.refresh_from_db()
    assert poison.status == Status.FAILED
    assert poison.error.startswith("dead-lettered: gave up")
    assert poison.dead_letters.count() == 1
    assert report.sent == 0


def test_each_republish_of_an_orphan_doubles_its_wait(messages):
    """Re-publishing a 10-minute backlog every interval would feed it; back off per row."""
    now = timezone.now()
    EmailMessage.objects.update(created_at=now - timedelta(minutes=10),
                                requeued_at=now - timedelta(minutes=6))
    interval = now - timedelta(minutes=2)
    # eligible when its age at the last re-publish (4 min) is less than the time since (6 min)
    assert len(ledger.orphaned_messages_claim_requeue(older_than=interval)) == 3
    EmailMessage.objects.update(requeued_at=now - timedelta(minutes=3))
    # age at the last re-publish was 7 min, only 3 min since: not yet, though past the interval
    assert ledger.orphaned_messages_claim_requeue(older_than=interval) == []


def test_orphans_whose_tasks_the_broker_still_holds_are_not_published_again(messages):
    """A backlog is not a loss: with two tasks of that priority still in the (FIFO) broker
    queue, the two newest QUEUED rows have theirs; only the oldest is re-published (decision 69)."""
    priority = messages[0].priority
    now = timezone.now()
    for age, message in zip((30, 20, 10), messages, strict=True):
        EmailMessage.objects.filter(pk=message.pk).update(created_at=now - timedelta(seconds=age))
    cutoff = now - timedelta(seconds=5)
    other = (priority + 1) % 4
    assert ledger.orphaned_messages_claim_requeue(older_than=cutoff, in_broker={priority: 3}) == []
    assert ledger.orphaned_messages_claim_requeue(older_than=cutoff, in_broker={priority: 2, other: 9}) == [
        (messages[0].pk, priority)]
    EmailMessage.objects.update(requeued_at=None)
    assert len(ledger.orphaned_messages_claim_requeue(older_than=cutoff, in_broker={other: 3})) == 3


def test_each_priority_has_its_own_claim_lease(messages):
    """A P0 claim abandoned 5 s ago is released (its lease is 4 s); a P2 claim that old is not."""
    from core.priorities import Priority, claim_lease_seconds

    critical, normal = messages[0], messages[1]
    EmailMessage.objects.filter(pk=critical.pk).update(priority=Priority.CRITICAL)
    EmailMessage.objects.filter(pk=normal.pk).update(priority=Priority.NORMAL)
    ids = [critical.pk, normal.pk]
    ledger.messages_claim(message_ids=ids, token="task-a")
    EmailMessage.objects.filter(pk__in=ids).update(claimed_at=timezone.now() - timedelta(seconds=5))
    now = timezone.now()
    cutoffs = {p: now - timedelta(seconds=claim_lease_seconds(p, 120)) for p in Priority}
    assert ledger.stale_claims_release(claimed_before=cutoffs) == [(critical.pk, Priority.CRITICAL)]
    EmailMessage.objects.filter(pk=normal.pk).update(claimed_at=timezone.now() - timedelta(seconds=61))
    assert ledger.stale_claims_release(claimed_before=cutoffs) == [(normal.pk, Priority.NORMAL)]


def test_each_priority_has_its_own_requeue_age(messages):
    from core.priorities import Priority, requeue_after_seconds

    critical, low = messages[0], messages[1]
    EmailMessage.objects.filter(pk=critical.pk).update(priority=Priority.CRITICAL)
    EmailMessage.objects.filter(pk__in=[low.pk, messages[2].pk]).update(priority=Priority.LOW)
    EmailMessage.objects.update(created_at=timezone.now() - timedelta(seconds=10))
    now = timezone.now()
    cutoffs = {p: now - timedelta(seconds=requeue_after_seconds(p, 120)) for p in Priority}
    assert ledger.orphaned_messages_claim_requeue(older_than=cutoffs) == [(critical.pk, Priority.CRITICAL)]


@pytest.mark.django_db(transaction=True)
def test_only_the_hand_off_mark_waits_for_the_wal_flush():
    """Claim and SENT mark commit without the flush wait (a crash can lose them without a second
    send; the process writes lost SENT marks again, decision 82); the hand-off mark, which
    exactly-once rests on, must stay synchronous."""
    from django.test.utils import CaptureQueriesContext

    version = template_version()
    ids = [email_message(version=version).id for _ in range(2)]
    with CaptureQueriesContext(connection) as queries:
        assert len(ledger.messages_claim(message_ids=ids, token="t")) == 2
        assert ledger.messages_mark_started(message_ids=ids, token="t").started == set(ids)
        sent = ledger.messages_mark_sent(provider_ids={i: f"p{i}" for i in ids}, provider="smtp", token="t")
    assert sent == 2
    relaxed = [q["sql"].startswith("SET LOCAL synchronous_commit TO OFF") for q in queries.captured_queries]
    assert relaxed == [True, False, True]
    assert set(EmailMessage.objects.filter(id__in=ids).values_list("status", flat=True)) == {Status.SENT}
    with connection.cursor() as cursor:  # SET LOCAL ended with its statement
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"


@pytest.mark.parametrize("status", ["PAUSED", "CANCELLED"])
def test_the_campaigns_claim_guard_is_registered_with_the_send_path(status):
    """campaigns/apps.py plugs its rule into the claim (delivery/extensions.py): a row of a paused
    or cancelled campaign is never claimed, a running campaign's row and a transactional one are."""
    from campaigns.models import Campaign

    version = template_version()
    stopped = Campaign.objects.create(name="stopped", template_version=version, status=status)
    running = Campaign.objects.create(name="running", template_version=version, status="SENDING")
    held = email_message(version=version, campaign=stopped, idempotency_key="held")
    sent = [email_message(version=version, campaign=running, idempotency_key="run"),
            email_message(version=version, idempotency_key="otp")]
    claimed = ledger.messages_claim(message_ids=[held.id, *(m.id for m in sent)], token="t")
    assert sorted(row[0] for row in claimed) == sorted(m.id for m in sent)


@pytest.mark.parametrize("claim", ["messages_claim", "messages_claim_hand_off", "messages_claim_for_send"])
def test_a_row_whose_campaign_was_deleted_in_a_race_is_never_claimed(claim):
    """Decision 63: campaign_id has no database constraint, so a fan-out chunk committed just
    after its campaign's deletion (the delete cascaded only the rows it saw) leaves rows naming
    no campaign. The claim guard asks for an existing, unstopped campaign: they stay unsent."""
    from campaigns.models import Campaign

    version = template_version()
    deleted = Campaign.objects.create(name="deleted", template_version=version, status="SENDING")
    deleted_id = deleted.pk
    deleted.delete()
    late = email_message(version=version, campaign_id=deleted_id, idempotency_key=f"c:{deleted_id}:1")
    otp = email_message(version=version, idempotency_key="otp")
    claimed = getattr(ledger, claim)(message_ids=[late.id, otp.id], token="t")
    # [(id, attempts)], {id: (status, attempts)} or [ClaimedMessage]
    assert [getattr(row, "id", row[0] if isinstance(row, tuple) else row) for row in claimed] == [otp.id]
    assert EmailMessage.objects.get(id=late.id).status == Status.QUEUED

"""A cancel racing a worker (READ COMMITTED, two connections).

The cancel never waits on a row a worker is writing: it skips it and leaves it to the worker
(handed over, it is sent and counted SENT, never marked CANCELLED behind the provider call;
released, the cancel's loop takes it once it is free). A cancel that waited on such a row while
holding the rows it had already locked deadlocked with the worker's multi-row statement waiting
on one of those: the cancel API answered 503 in CI during a busy campaign."""

from __future__ import annotations

import threading
import time

import psycopg2
import pytest
from django.db import connection, transaction

from campaigns.models import Campaign
from campaigns.services.fanout import campaign_fanout
from campaigns.services.lifecycle import campaign_cancel, campaign_rows_cancel
from delivery.models import EmailMessage
from delivery.services import ledger
from tests import factories

MS = EmailMessage.Status
TABLE = EmailMessage._meta.db_table
pytestmark = pytest.mark.usefixtures("transactional_db", "purged_queues")


def _waiting_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        # Asked inside the worker's transaction: without the clear, pg_stat_activity would answer
        # from the snapshot its first read took.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                       "AND datname = current_database()")
        return cursor.fetchone()[0] > 0


def _claimed_campaign(size: int) -> tuple[Campaign, list[int]]:
    """A sending campaign whose `size` rows a worker (token "worker") has claimed."""
    campaign = Campaign.objects.create(
        name="race", template_version=factories.template_version(), status=Campaign.Status.QUEUED,
        audience={"client_id": factories.owner().pk, "type": "inline",
                  "contacts": [{"email": f"r{i}@example.com"} for i in range(size)]},
    )
    campaign_fanout(campaign_id=campaign.pk)
    ids = sorted(EmailMessage.objects.filter(campaign=campaign).values_list("id", flat=True))
    assert len(ledger.messages_claim(message_ids=ids, token="worker")) == size
    return campaign, ids


def _worker_connection():
    """The worker's own connection, its transaction left open by each statement."""
    conn = psycopg2.connect(**connection.get_connection_params())
    conn.autocommit = False
    return conn


def _statuses(ids: list[int]) -> dict[int, str]:
    return dict(EmailMessage.objects.filter(id__in=ids).values_list("id", "status"))


def test_a_row_handed_over_while_the_cancel_runs_stays_the_workers():
    campaign, ids = _claimed_campaign(5)
    cancelled: list[int] = []

    def cancel() -> None:
        try:
            cancelled.append(campaign_rows_cancel(campaign_id=campaign.pk))
        finally:
            connection.close()

    with transaction.atomic():  # the worker's hand-off mark, not committed yet
        assert ledger.messages_mark_started(message_ids=ids, token="worker").started == set(ids)
        canceller = threading.Thread(target=cancel)
        canceller.start()
        time.sleep(0.5)  # the cancel's loop runs meanwhile: it looks again, it never queues
        assert not _waiting_for_a_lock(), "the cancel waited on the worker's rows"
        assert canceller.is_alive(), "the cancel ended while the rows were still unsent to it"
    canceller.join(timeout=10)
    assert cancelled == [0]
    assert set(_statuses(ids).values()) == {MS.SENDING}
    sent = ledger.messages_mark_sent(provider_ids={i: f"p{i}" for i in ids}, provider="smtp", token="worker")
    assert sent == 5


def test_the_cancel_skips_the_row_a_worker_holds_and_the_worker_is_never_deadlocked():
    campaign, ids = _claimed_campaign(3)
    worker = _worker_connection()
    try:
        with worker.cursor() as cursor:  # the hand-off of the last row, in the middle of its statement
            cursor.execute(f"UPDATE {TABLE} SET send_started_at = now() WHERE id = %s", [ids[-1]])
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")  # the old cancel waited here (then deadlocked)
        campaign_cancel(campaign_id=campaign.pk)
        with worker.cursor() as cursor:  # the same statement reaches the first row: free, and no longer its
            cursor.execute(f"UPDATE {TABLE} SET send_started_at = now() WHERE id = %s "
                           "AND status = 'SENDING' AND claim_token = 'worker'", [ids[0]])
            assert cursor.rowcount == 0
        worker.commit()
    finally:
        worker.rollback()
        worker.close()
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
    assert _statuses(ids) == {ids[0]: MS.CANCELLED, ids[1]: MS.CANCELLED, ids[2]: MS.SENDING}
    assert campaign_rows_cancel(campaign_id=campaign.pk) == 0  # the handed-over row stays the worker's
    assert EmailMessage.objects.get(pk=ids[-1]).send_started_at is not None


def test_a_row_released_while_the_cancel_runs_is_cancelled_once_free():
    campaign, ids = _claimed_campaign(4)
    worker = _worker_connection()
    result: list[int] = []
    try:
        with worker.cursor() as cursor:  # the worker gives its first row back (a release), uncommitted
            cursor.execute(f"UPDATE {TABLE} SET status = 'QUEUED', claim_token = '' WHERE id = %s", [ids[0]])

        def cancel() -> None:
            try:
                result.append(campaign_rows_cancel(campaign_id=campaign.pk))
            finally:
                connection.close()

        canceller = threading.Thread(target=cancel)
        canceller.start()
        deadline = time.monotonic() + 10
        while _statuses(ids[1:]) != dict.fromkeys(ids[1:], MS.CANCELLED) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _waiting_for_a_lock(), "the cancel waited on the worker's row"
        assert canceller.is_alive(), "the cancel ended with the released row still unsent"
        worker.commit()
        canceller.join(timeout=10)
    finally:
        worker.rollback()
        worker.close()
    assert result == [4]
    assert set(_statuses(ids).values()) == {MS.CANCELLED}


def test_a_row_busy_past_the_limit_is_left_to_a_later_run_of_the_task(monkeypatch):
    from campaigns.services import lifecycle
    from core.priorities import MAINTENANCE_QUEUE
    from notifier.celery import app as celery_app

    monkeypatch.setattr(lifecycle, "CANCEL_BUSY_SECONDS", 0.3)
    campaign, ids = _claimed_campaign(3)
    worker = _worker_connection()
    try:
        with worker.cursor() as cursor:  # a row held for longer than the loop looks
            cursor.execute(f"UPDATE {TABLE} SET error = 'held' WHERE id = %s", [ids[1]])
        started = time.monotonic()
        assert campaign_rows_cancel(campaign_id=campaign.pk) == 2
        assert time.monotonic() - started < 5
    finally:
        worker.rollback()
        worker.close()
    with celery_app.connection_for_read() as conn:  # after the fan-out's progress check
        queue = conn.SimpleQueue(MAINTENANCE_QUEUE, no_ack=True)
        messages = [queue.get(timeout=10) for _ in range(2)]
    message = next(m for m in messages if m.headers["task"] == "campaigns.cancel_rows")
    assert message.payload[0] == [campaign.pk]
    assert message.headers["eta"] is not None  # later, not at once
    assert campaign_rows_cancel(campaign_id=campaign.pk) == 1  # that run takes the freed row
    assert set(_statuses(ids).values()) == {MS.CANCELLED}

"""A cancel racing a worker's hand-off mark (READ COMMITTED, two connections): the row the
worker handed over while the cancel waited for its lock is sent and counted SENT, never
marked CANCELLED behind the provider call."""

from __future__ import annotations

import threading
import time

from django.db import connection, transaction

from campaigns.models import Campaign
from campaigns.services.fanout import campaign_fanout
from delivery.models import EmailMessage
from delivery.services import ledger
from tests import factories

MS = EmailMessage.Status


def _waiting_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        # Asked inside the worker's transaction: without the clear, pg_stat_activity would answer
        # from the snapshot its first read took.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                       "AND datname = current_database()")
        return cursor.fetchone()[0] > 0


def test_a_row_handed_over_while_the_cancel_waits_for_its_lock_stays_the_workers(
        transactional_db, purged_queues):
    campaign = Campaign.objects.create(
        name="race", template_version=factories.template_version(), status=Campaign.Status.QUEUED,
        audience={"client_id": factories.owner().pk, "type": "inline",
                  "contacts": [{"email": f"r{i}@example.com"} for i in range(5)]},
    )
    campaign_fanout(campaign_id=campaign.pk)
    ids = list(EmailMessage.objects.filter(campaign=campaign).values_list("id", flat=True))
    assert len(ledger.messages_claim(message_ids=ids, token="worker")) == 5
    cancelled: list[int] = []

    def cancel() -> None:
        try:
            cancelled.append(ledger.campaign_unsent_cancel(campaign_id=campaign.pk, limit=100))
        finally:
            connection.close()

    with transaction.atomic():  # the worker's hand-off mark, not committed yet
        assert ledger.messages_mark_started(message_ids=ids, token="worker").started == set(ids)
        canceller = threading.Thread(target=cancel)
        canceller.start()
        deadline = time.monotonic() + 10
        while not _waiting_for_a_lock() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _waiting_for_a_lock(), "the cancel never queued behind the hand-off mark"
    canceller.join(timeout=10)
    assert cancelled == [0]
    assert set(EmailMessage.objects.filter(id__in=ids).values_list("status", flat=True)) == {MS.SENDING}
    sent = ledger.messages_mark_sent(provider_ids={i: f"p{i}" for i in ids}, provider="smtp", token="worker")
    assert sent == 5

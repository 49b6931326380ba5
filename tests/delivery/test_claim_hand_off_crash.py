"""A bulk (P3) batch that claims and hands over in one write (decision 59), with real worker
processes killed while they render: nothing was written, so the redelivery sends everything
once and the attempts that the poison guard reads are still counted."""

from __future__ import annotations

import pytest

from delivery.models import DeadLetter, EmailMessage
from delivery.services.dispatch import messages_enqueue
from notifier.celery import app as celery_app
from testkit.waiting import wait_for
from tests.delivery.conftest import ledger_counts
from tests.delivery.test_delivery_faults import _env
from tests.support.send_runs import messages_create, send_workers, settled, statuses

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
Status = EmailMessage.Status


@pytest.fixture(autouse=True)
def _purge():
    celery_app.control.purge()
    yield
    celery_app.control.purge()


def test_a_bulk_batch_killed_while_rendering_is_sent_once_and_the_poison_dead_lettered(esps, spawn, tmp_path):
    ids = messages_create(60, priority=3)
    [poison_id] = messages_create(1, priority=3, prefix="crash")
    EmailMessage.objects.filter(id=poison_id).update(recipient="crash@x.example")
    env = _env(esps, "sendgrid", NOTIFIER_FAULT_CRASH_RECIPIENT="crash@x.example")
    send_workers(spawn, tmp_path, env, "low", concurrency=2)
    messages_enqueue(message_ids=[*ids[:30], poison_id, *ids[30:]], priority=3)  # one batch
    assert wait_for(lambda: settled([poison_id, *ids]), 150), statuses([poison_id, *ids])
    assert statuses(ids) == {Status.SENT: 60}
    assert DeadLetter.objects.filter(message_id=poison_id).exists()
    # The same count as the three-write path: the deliveries that died before the one write
    # counted nothing, the redelivered ones claimed first (P3 allows 8).
    assert EmailMessage.objects.get(id=poison_id).attempts == 9
    assert ledger_counts(esps, ids) == ([], {}, {})

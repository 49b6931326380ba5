"""F3: a send slower than the broker's visibility timeout, on a real Redis broker.

kombu's Redis transport cannot tell a busy worker from a dead one: a message left unacknowledged
past the visibility timeout (acks_late: a task is acked when it ends) goes back on its queue, and
another worker process runs the same task, with the same task id, while the first copy is still
waiting for the ESP. Exactly one of them may send each message. The ledger fences the copy: the
hand-off mark (`send_started_at`, set once under the task's claim token, right before the
provider call) is already there, so the copy's claim takes nothing; a copy that overtakes the
first before its hand-off wins the mark instead and the first sends nothing.

The test proves the redelivery happened: each task's "received" line appears in the workers' logs
at least twice (NOTIFIER_LOG_EACH_TASK), else it would prove nothing.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from core.priorities import queue_for
from delivery.models import EmailMessage
from delivery.services.dispatch import messages_enqueue
from testkit import processes
from testkit.waiting import wait_for
from tests.delivery.conftest import esp_env, ledger_counts
from tests.support.broker_messages import (
    send_tasks_all_done,
    send_tasks_waiting,
    tasks_received,
)
from tests.support.send_runs import Spawn, messages_create, send_workers, settled, statuses

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
Status = EmailMessage.Status
VISIBILITY_SECONDS = 2  # NOTIFIER_VISIBILITY_TIMEOUT is whole seconds
ESP_SECONDS = 6.0  # the fake ESP answers after three visibility timeouts
STALL_SECONDS = 14.0  # the first copies' stall after their claim: the second worker starts meanwhile
SLOWER_ESP_SECONDS = 15.0  # the copies still wait for the ESP when the first copies wake
SLOW_SEND_ENV = {
    "NOTIFIER_PROVIDERS": "sendgrid",
    "NOTIFIER_VISIBILITY_TIMEOUT": str(VISIBILITY_SECONDS),
    # kombu sweeps the unacked set every ~100 s by default; twice a second here (tests/fault_settings.py).
    "NOTIFIER_FAULT_UNACKED_RESTORE_SECONDS": "0.5",
    # A slow answer is an answer: well inside the read timeout, so the send is not AMBIGUOUS.
    "NOTIFIER_ESP_READ_TIMEOUT_SECONDS": str(ESP_SECONDS * 3),
    "NOTIFIER_LOG_EACH_TASK": "true",  # the "received" lines that show the redelivery
}


def _slow_esp_workers(spawn: Spawn, log_dir: Path, esps: dict, role: str, **extra: str) -> list:
    """Two workers of the pool, two processes each: a redelivered copy finds an idle process
    while the first copy still waits for the ESP."""
    env = processes.subprocess_env(**esp_env(esps), **SLOW_SEND_ENV, **extra)
    return send_workers(spawn, log_dir, env, role, count=2, concurrency=2)


def _assert_redelivered_and_sent_once(workers: list, tasks: dict[str, list[int]], esps: dict,
                                      ids: list[int]) -> None:
    assert wait_for(lambda: settled(ids), timeout=60, interval=0.2), statuses(ids)
    # A copy may still be waiting for the ESP after the first copy's SENT mark: count after it.
    assert wait_for(lambda: send_tasks_all_done([w.log() for w in workers]), timeout=60, interval=0.2)
    received = tasks_received(w.log() for w in workers)
    assert {task: received[task] >= 2 for task in tasks} == dict.fromkeys(tasks, True), received
    lost, duplicates, cross = ledger_counts(esps, ids)
    assert (len(lost), duplicates, cross) == (0, {}, {})
    assert statuses(ids) == {Status.SENT: len(ids)}


@pytest.mark.parametrize(("role", "priority", "count"), [
    ("critical", 0, 2),  # one message per task: the single-message path (send_one)
    ("normal", 2, 200),  # two batches of 100: claim, render, hand-off mark
    ("low", 3, 600),  # 500 + 100: a first delivery claims and hands over in one write
])
def test_an_esp_slower_than_the_visibility_timeout_gets_each_message_once(
    esps, spawn, tmp_path, role, priority, count
):
    ids = messages_create(count, priority)
    messages_enqueue(message_ids=ids, priority=priority)
    tasks = send_tasks_waiting(queue_for(priority))
    assert sorted(i for batch in tasks.values() for i in batch) == sorted(ids)
    esps["sendgrid"].faults.slow(ESP_SECONDS)
    workers = _slow_esp_workers(spawn, tmp_path, esps, role)
    _assert_redelivered_and_sent_once(workers, tasks, esps, ids)
    assert esps["sendgrid"].ledger.count() == count


def test_a_first_copy_that_stalls_before_its_hand_off_loses_it_to_the_redelivered_copy(esps, spawn, tmp_path):
    """The first copies stall between their claim and their hand-off past the visibility timeout
    (a slow render, a long pause): each redelivered copy re-claims its row (same task id, not
    handed over), hands it over and calls the slow ESP. The first copies wake while the copies
    still wait for the ESP, the row still SENDING under their own token: only the hand-off mark
    (`send_started_at` already set) stops them from sending it a second time.

    Only the first worker stalls (NOTIFIER_FAULT_PAUSE_AFTER_CLAIM); the second starts once the
    first holds every task, so it runs the redelivered copies."""
    ids = messages_create(2, priority=0)
    messages_enqueue(message_ids=ids, priority=0)
    tasks = send_tasks_waiting(queue_for(0))
    esps["sendgrid"].faults.slow(SLOWER_ESP_SECONDS)
    env = processes.subprocess_env(**{**esp_env(esps), **SLOW_SEND_ENV,
                                      "NOTIFIER_ESP_READ_TIMEOUT_SECONDS": str(SLOWER_ESP_SECONDS * 2)})
    stalling = send_workers(spawn, tmp_path, {**env, "NOTIFIER_FAULT_PAUSE_AFTER_CLAIM": str(STALL_SECONDS)},
                            "critical", concurrency=len(ids))[0]
    assert wait_for(lambda: stalling.log().count("fault: pausing") == len(ids), timeout=30)
    stalled_at = time.monotonic()
    second = processes.celery_worker("critical", env, tmp_path, concurrency=len(ids))
    second.name, second.log_path = "worker-critical-copies", tmp_path / "worker-critical-copies.log"
    spawn(second).wait_for_log("ready.", timeout=60)
    # The copies must have handed over before the first copies wake, or this proves nothing.
    assert wait_for(lambda: _handed_over(ids), timeout=STALL_SECONDS - 1, interval=0.1)
    assert time.monotonic() - stalled_at < STALL_SECONDS
    _assert_redelivered_and_sent_once([stalling, second], tasks, esps, ids)
    assert "sent=0" in stalling.log() and "sent=1" not in stalling.log()  # the first copies lost
    # Claimed by both copies of its task (an attempt each); sent by the second copy.
    assert set(EmailMessage.objects.filter(id__in=ids).values_list("attempts", flat=True)) == {2}


def _handed_over(ids: list[int]) -> bool:
    return EmailMessage.objects.filter(id__in=ids, send_started_at__isnull=False).count() == len(ids)

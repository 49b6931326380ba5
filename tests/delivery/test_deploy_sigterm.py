"""F14: a deploy sends SIGTERM to every worker pool (all four priorities) mid-send, then starts
them again: 0 lost, 0 duplicates, and nothing waits for the broker's visibility timeout.

What the warm shutdown does (Celery 5.7 prefork, acks_late, kombu's Redis transport): the worker
stops consuming, lets each task already running in a child finish (its rows are sent and marked,
the task acked), and closes its broker channel; closing the channel puts every message the
worker had taken but not acked (prefetched tasks, retries and deferrals waiting for their
countdown) back on its queue at once ("Restoring N unacknowledged message(s)"). So after the
shutdown the broker's `unacked` set is empty and no row is left claimed: the restarted pools take
the rest from the queues straight away, instead of after the visibility timeout (here 120 s, kombu
sweeping every ~100 s) or a claim lease. No scheduler runs, so its recovery loop cannot be what
re-publishes anything.

Two deploys: `docker stop` signals the main process (a container's PID 1) only; honcho (`make
run`, the Procfile), systemd's default KillMode and a PaaS dyno signal every process of the pool,
children included. Those children used to die mid-send (core/pool_shutdown.py, decision 93).

The bulk pools send to a rate-limited domain and the ESP answers in 50 ms, so the SIGTERM lands
while every pool has sent some of its rows and not others; the test checks it did.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from django.db.models import Count, Q

from delivery.models import EmailMessage
from delivery.services.dispatch import messages_enqueue
from testkit import processes
from testkit.waiting import wait_for
from tests.delivery.conftest import esp_env, ledger_counts
from tests.support.broker_messages import broker_client
from tests.support.send_runs import Spawn, messages_create, settled, statuses

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
Status = EmailMessage.Status
VISIBILITY_SECONDS = 120
BULK_DOMAIN = "bulk.example"
# priority: (pool, messages, recipient domain); 4,300 messages, P1-P3 in batches of 10/100/500.
MIX = {0: ("critical", 300, "example.com"), 1: ("high", 1000, "example.com"),
       2: ("normal", 1500, BULK_DOMAIN), 3: ("low", 1500, BULK_DOMAIN)}
DEPLOY_ENV = {
    "NOTIFIER_PROVIDERS": "sendgrid",
    "NOTIFIER_VISIBILITY_TIMEOUT": str(VISIBILITY_SECONDS),
    "NOTIFIER_DOMAIN_RATE_LIMITS": f"{BULK_DOMAIN}=300",  # the bulk pools take >= 10 s
    # Deferred and retried tasks come back within seconds (they wait in the worker, unacked).
    "NOTIFIER_RETRY_BASE_SECONDS": "0.2", "NOTIFIER_RETRY_CAP_SECONDS": "2", "NOTIFIER_DEFER_SECONDS": "0.3",
}


def _pools(spawn: Spawn, log_dir: Path, env: dict[str, str]) -> list[processes.ManagedProcess]:
    """One worker per priority, two processes each, started together; once all are ready (a
    restarted pool appends to its first run's log: only what it writes counts)."""
    pools = [processes.celery_worker(role, env, log_dir, concurrency=2) for role, _, _ in MIX.values()]
    offsets = [len(worker.log()) for worker in pools]
    for worker in pools:
        spawn(worker)
    for worker, offset in zip(pools, offsets, strict=True):
        worker.wait_for_log("ready.", timeout=60, after=offset)
    return pools


def _progress(ids: list[int]) -> dict[int, tuple[int, int]]:
    """{priority: (rows SENT, rows not finished)} in one query."""
    rows = (EmailMessage.objects.filter(id__in=ids).values("priority")
            .annotate(sent=Count("id", filter=Q(status=Status.SENT)),
                      open=Count("id", filter=Q(status__in=[Status.QUEUED, Status.SENDING]))))
    return {row["priority"]: (row["sent"], row["open"]) for row in rows}


def _every_pool_mid_send(ids: list[int]) -> bool:
    progress = _progress(ids)
    return len(progress) == len(MIX) and all(sent > 0 and left > 0 for sent, left in progress.values())


def _deploy_stop(pools: list[processes.ManagedProcess], whole_group: bool) -> None:
    """SIGTERM to every pool at once, then wait: each must finish its warm shutdown by itself,
    not be killed. `whole_group`: to each pool's main process and its children, as honcho
    (`make run`, the Procfile), systemd's default KillMode and a PaaS dyno send it; else to the
    main process only, as `docker stop` does to a container's PID 1."""
    for worker in pools:
        if whole_group:
            os.killpg(worker.process.pid, signal.SIGTERM)
        else:
            worker.process.send_signal(signal.SIGTERM)
    for worker in pools:
        assert worker.process.wait(timeout=60) == 0, worker.log()[-3000:]
        assert "Warm shutdown" in worker.log()
        assert "WorkerLostError" not in worker.log()  # no running task was killed


@pytest.mark.parametrize("whole_group", [False, True], ids=["main-process", "process-group"])
def test_sigterm_to_every_pool_mid_send_then_restart_loses_and_repeats_nothing_without_waiting(
    esps, spawn, tmp_path, whole_group
):
    env = processes.subprocess_env(**esp_env(esps), **DEPLOY_ENV)
    by_priority = {p: messages_create(n, p, domain=domain, prefix=f"p{p}-")
                   for p, (_, n, domain) in MIX.items()}
    ids = [pk for batch in by_priority.values() for pk in batch]
    esps["sendgrid"].faults.slow(0.05)
    pools = _pools(spawn, tmp_path, env)
    for priority, batch in by_priority.items():
        messages_enqueue(message_ids=batch, priority=priority)
    assert wait_for(lambda: _every_pool_mid_send(ids), timeout=60, interval=0.05), _progress(ids)

    _deploy_stop(pools, whole_group)
    at_stop = _progress(ids)
    assert all(left > 0 for _, left in at_stop.values()), at_stop  # every pool stopped mid-send
    assert broker_client().hlen("unacked") == 0  # nothing hidden until the visibility timeout
    assert not EmailMessage.objects.filter(id__in=ids, status=Status.SENDING).exists()  # no lease to wait for

    restarted = time.monotonic()
    _pools(spawn, tmp_path, env)
    assert wait_for(lambda: settled(ids), timeout=VISIBILITY_SECONDS / 2, interval=0.2), statuses(ids)
    took = time.monotonic() - restarted
    time.sleep(1)  # a late copy would reach the ESP now
    lost, duplicates, cross = ledger_counts(esps, ids)
    assert (len(lost), duplicates, cross) == (0, {}, {})
    assert statuses(ids) == {Status.SENT: len(ids)}
    print(f"F14: at SIGTERM {at_stop} (priority: sent, left); all sent {took:.1f} s after the restart")

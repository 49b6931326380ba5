"""Real scheduler processes over real Redis and PostgreSQL: stalls, crashes and Redis loss.

No Celery worker runs here: publishes are counted on the broker itself (every send task's ids),
so a second dispatch of any message would show as a count of 2. "None early" is read from the
record: each row's dispatch stamp (`requeued_at`, set by the fencing UPDATE) against its
`scheduled_for`, and rows due later must still be SCHEDULED while earlier ones leave.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from core.redis_client import get_redis
from delivery.models import EmailMessage
from scheduling.services import due
from scheduling.services.lock import lock_key
from testkit import processes
from testkit.ports import free_port
from testkit.waiting import wait_for as _wait_for
from tests import factories
from tests.scheduling.support import published_ids, schedule_rows, scheduled_rows_insert

pytestmark = pytest.mark.e2e
Status = EmailMessage.Status
BULK = int(os.environ.get("NOTIFIER_TEST_SCHEDULER_BULK", "100000"))


@pytest.fixture
def env(transactional_db) -> dict[str, str]:
    return processes.subprocess_env(
        NOTIFIER_SCHEDULER_LOCK_TTL_SECONDS="2",
        NOTIFIER_SCHEDULE_LEASE_SECONDS="3",
        # No worker consumes in these tests; keep delivery's orphan re-publish out of the count.
        NOTIFIER_REQUEUE_AFTER_SECONDS="3600",
    )




def _queued(ids: list[int]) -> int:
    """Rows of this test now QUEUED (the test database holds only this test's rows)."""
    return EmailMessage.objects.filter(status=Status.QUEUED).count()


def _dispatched_early() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {EmailMessage._meta.db_table} "
            "WHERE status = 'QUEUED' AND (requeued_at IS NULL OR requeued_at < scheduled_for)"
        )
        return cursor.fetchone()[0]


def _assert_published_exactly_once(ids: list[int]) -> None:
    counts = published_ids()
    lost = [pk for pk in ids if counts[pk] == 0]
    duplicates = {pk: n for pk, n in counts.items() if n > 1}
    assert (len(lost), duplicates) == (0, {})
    assert set(counts) == set(ids)


def _rows(count: int, due_in: float, spread: float = 0.0) -> list[int]:
    version = factories.template_version()
    ids = scheduled_rows_insert(version_id=version.id, count=count, spread_seconds=spread,
                                due_at=timezone.now() + timedelta(seconds=due_in))
    schedule_rows(ids)
    return ids


@pytest.mark.parametrize(("lease", "stop", "stale_publish_allowed"), [
    (10, 4, False),  # stopped past its lock TTL (2 s), within its claim lease
    (3, 5, True),    # stopped past its lease too: the reaper hands its claim to another
])
def test_three_schedulers_one_stopped_past_its_lock_ttl_dispatch_each_message_once_never_early(
    env, spawn, tmp_path, lease, stop, stale_publish_allowed
):
    env = {**env, "NOTIFIER_SCHEDULE_LEASE_SECONDS": str(lease)}
    ids = _rows(BULK, due_in=4, spread=6)
    schedulers = [spawn(processes.scheduler(env, tmp_path, name=f"scheduler-{n}")) for n in range(3)]
    for scheduler in schedulers:
        scheduler.wait_for_log("scheduler ready")
    redis = get_redis()
    # Catch the active dispatcher while it holds a claim, and freeze it past its lock TTL.
    assert _wait_for(lambda: redis.zcard(due.processing_key()) > 0, timeout=30, interval=0.002)
    token = (redis.get(lock_key()) or b"").decode()
    holder = next(s for s in schedulers if token and token in s.log())
    os.kill(holder.process.pid, signal.SIGSTOP)
    frozen_claim = {int(m) for m in redis.zrange(due.processing_key(), 0, -1)}
    assert EmailMessage.objects.filter(status=Status.SCHEDULED).exists()
    time.sleep(stop)
    # another scheduler took the lock over
    assert _wait_for(lambda: (redis.get(lock_key()) or token.encode()).decode() != token, timeout=5)
    os.kill(holder.process.pid, signal.SIGCONT)
    assert _wait_for(lambda: _queued(ids) == len(ids), timeout=90, interval=0.5), _queued(ids)
    time.sleep(1.5)  # the resumed scheduler finishes whatever it held
    counts = published_ids()
    assert [pk for pk in ids if counts[pk] == 0] == []  # 0 lost
    duplicates = {pk for pk, n in counts.items() if n > 1}
    if stale_publish_allowed:
        # Frozen mid-publish past its lease, the stalled scheduler can only repeat a publish of
        # its own claim (<= 1 batch); each row changed state once, and the worker's claim lets
        # one task send it (tests/e2e). Nothing else may repeat.
        assert duplicates <= frozen_claim and max(counts.values()) <= 2
    else:
        assert duplicates == set()
    assert set(counts) == set(ids)
    assert _dispatched_early() == 0
    assert redis.zcard(due.due_key()) == redis.zcard(due.processing_key()) == 0


@pytest.mark.parametrize("fault", ["NOTIFIER_FAULT_SCHEDULER_PAUSE_AFTER_CLAIM",
                                   "NOTIFIER_FAULT_SCHEDULER_PAUSE_AFTER_FENCE"])
def test_scheduler_killed_between_claim_and_hand_off_loses_nothing_and_duplicates_nothing(
    env, spawn, tmp_path, fault
):
    ids = _rows(2000, due_in=-1)
    crashing = spawn(processes.scheduler({**env, fault: "60"}, tmp_path, name="crashing"))
    crashing.wait_for_log("fault: pausing")
    claimed = get_redis().zcard(due.processing_key())
    assert claimed > 0
    crashing.kill_group(signal.SIGKILL)
    assert published_ids() == {}
    started = time.monotonic()
    spawn(processes.scheduler(env, tmp_path, name="successor"))
    assert _wait_for(lambda: len(published_ids()) == len(ids), timeout=30, interval=0.2)
    assert time.monotonic() - started >= 1.0  # the crashed claim waited for its lease
    time.sleep(1.5)
    _assert_published_exactly_once(ids)
    assert _queued(ids) == len(ids)
    assert get_redis().zcard(due.processing_key()) == 0


def test_redis_flushed_with_future_sends_pending_is_rebuilt_and_each_sent_once(env, spawn, tmp_path):
    # Due in 15 s: the rebuild and the scheduler's start must fit before it even on a loaded
    # machine (with 8 s, three parallel test workers on 2 cores sometimes ate the margin).
    first_due = time.monotonic() + 15
    ids = _rows(10_000, due_in=15, spread=3)
    get_redis().flushdb()  # Redis lost everything: the due set and the broker's queues
    rebuild = subprocess.run([sys.executable, "manage.py", "rebuild_schedule", "--batch-size", "2000"],
                             cwd=processes.BASE_DIR, env=env, capture_output=True, text=True, timeout=120)
    assert rebuild.returncode == 0, rebuild.stderr
    assert "10000 scheduled messages" in rebuild.stdout
    assert get_redis().zcard(due.due_key()) == 10_000
    spawn(processes.scheduler(env, tmp_path))
    time.sleep(min(5.0, max(0.0, first_due - time.monotonic() - 1)))
    assert time.monotonic() < first_due, "the rebuild took the whole margin: nothing was checked"
    assert _queued(ids) == 0  # nothing is due yet
    assert _wait_for(lambda: _queued(ids) == len(ids), timeout=40, interval=0.5)
    time.sleep(1.5)
    _assert_published_exactly_once(ids)
    assert _dispatched_early() == 0


def test_broker_down_at_publish_keeps_the_scheduler_alive_and_the_rows_are_published_once_later(
    env, spawn, tmp_path
):
    ids = _rows(500, due_in=-1)
    dead_broker = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    broken = spawn(processes.scheduler({**env, "CELERY_BROKER_URL": dead_broker}, tmp_path, name="no-broker"))
    broken.wait_for_log("dispatch failed", timeout=60)
    assert _queued(ids) == len(ids)  # fenced in PostgreSQL, never published
    assert published_ids() == {}
    assert broken.process.poll() is None  # still ticking
    broken.kill_group(signal.SIGKILL)
    spawn(processes.scheduler(env, tmp_path, name="with-broker"))
    assert _wait_for(lambda: len(published_ids()) == len(ids), timeout=30, interval=0.2)
    time.sleep(1.5)
    _assert_published_exactly_once(ids)

"""The dispatcher against real Redis and PostgreSQL, in-process (the crash tests use processes)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from core.redis_client import get_redis
from delivery.models import EmailMessage
from scheduling import signals
from scheduling.services import due
from scheduling.services.dispatcher import due_batch_dispatch, due_drain, messages_fence_queue_detailed
from scheduling.services.lock import DispatcherLock
from scheduling.services.rebuild import overdue_schedule_restore, schedule_rebuild
from tests import factories
from tests.scheduling.support import published_ids, schedule_rows, scheduled_rows_insert

pytestmark = pytest.mark.django_db
Status = EmailMessage.Status


@pytest.fixture(autouse=True)
def _one_thread(settings):
    """These tests run inside one test transaction, which other threads' connections cannot see;
    the threaded drain runs in the scheduler process tests."""
    settings.NOTIFIER_SCHEDULE_DISPATCH_THREADS = 1


@pytest.fixture
def version():
    return factories.template_version()


def _rows(version, count, offset_seconds, **kw):
    ids = scheduled_rows_insert(version_id=version.id, count=count,
                                due_at=timezone.now() + timedelta(seconds=offset_seconds), **kw)
    schedule_rows(ids)
    return ids


def test_due_rows_are_published_once_and_future_rows_wait(version):
    past = _rows(version, 2500, -5, tag="past")
    future = _rows(version, 300, 3600, tag="future")
    report = due_drain(budget_seconds=10)
    assert (report.claimed, report.dispatched) == (2500, 2500)
    assert published_ids() == {pk: 1 for pk in past}
    assert EmailMessage.objects.filter(id__in=past, status=Status.QUEUED).count() == 2500
    assert EmailMessage.objects.filter(id__in=future, status=Status.SCHEDULED).count() == 300
    assert due_drain(budget_seconds=1).claimed == 0
    stats = due.due_stats(now=time.time())
    assert (stats.due_now, stats.future, stats.processing) == (0, 300, 0)


def test_cancelled_row_is_never_published_and_leaves_the_set(version):
    ids = _rows(version, 3, -1)
    EmailMessage.objects.filter(id=ids[0]).update(status=Status.CANCELLED)
    report = due_batch_dispatch()
    assert (report.claimed, report.dispatched) == (3, 2)
    assert set(published_ids()) == set(ids[1:])
    assert get_redis().zcard(due.due_key()) == get_redis().zcard(due.processing_key()) == 0


def test_an_early_claim_is_fenced_by_the_database_clock_and_returned(version):
    ids = _rows(version, 5, 60)
    report = due_batch_dispatch(now=time.time() + 120)  # a scheduler whose clock runs ahead
    assert (report.claimed, report.dispatched, report.returned) == (5, 0, 5)
    assert published_ids() == {}
    scores = dict(get_redis().zrange(due.due_key(), 0, -1, withscores=True))
    expected = dict(EmailMessage.objects.filter(id__in=ids).values_list("id", "scheduled_for"))
    assert {int(k): v for k, v in scores.items()} == pytest.approx(
        {k: v.timestamp() for k, v in expected.items()})


def test_claim_abandoned_after_the_fence_is_republished_once_after_the_lease(version, settings):
    ids = _rows(version, 10, -1)
    # A scheduler fenced the rows (QUEUED) and died before publishing: rows QUEUED, never
    # claimed by a worker, ids still in processing.
    settings.NOTIFIER_SCHEDULE_LEASE_SECONDS = 0.4
    claim = due.due_claim(now=time.time(), limit=1000, lease_seconds=0.4)
    fenced, _ = messages_fence_queue_detailed(
        message_ids=claim.ids, dispatched_before=datetime.fromtimestamp(claim.claimed_at, tz=UTC)
    )
    assert len(fenced) == 10
    assert due_batch_dispatch().claimed == 0  # still leased
    time.sleep(0.5)
    assert sorted(due.due_reap(now=time.time())) == ids
    assert due_batch_dispatch().dispatched == 10
    assert published_ids() == {pk: 1 for pk in ids}
    assert due_batch_dispatch().claimed == 0


def test_a_claim_too_old_to_fence_changes_nothing_so_an_abandoned_batch_loses_nothing(version, settings):
    """A scheduler slowed between its claim and its fence past half a lease, then frozen past
    the lease after the fence: before the fence's `fence_by` guard its late stamp looked "just
    dispatched" to the successor, which acknowledged the rows without publishing them, and the
    frozen one abandoned its batch: QUEUED rows that nobody published."""
    ids = _rows(version, 10, -1)
    settings.NOTIFIER_SCHEDULE_LEASE_SECONDS = 4  # lease/2 = 2 s; lease left until 3 s (margin 1)

    def slow_before_fence(**_: object) -> None:
        time.sleep(2.5)

    def frozen_before_publish(**_: object) -> None:
        time.sleep(1.0)

    signals.due_batch_claimed.connect(slow_before_fence)
    signals.due_batch_fenced.connect(frozen_before_publish)
    try:
        claimed_at = time.time()
        due_batch_dispatch()
    finally:
        signals.due_batch_claimed.disconnect(slow_before_fence)
        signals.due_batch_fenced.disconnect(frozen_before_publish)
    time.sleep(max(0.0, claimed_at + 4.1 - time.time()))
    due.due_reap(now=time.time())
    due_batch_dispatch()
    assert published_ids() == {pk: 1 for pk in ids}
    assert EmailMessage.objects.filter(id__in=ids, status=Status.QUEUED).count() == 10


def test_a_row_dispatched_moments_ago_and_put_back_by_a_rebuild_is_not_published_again(version):
    ids = _rows(version, 5, -1)
    assert due_batch_dispatch().dispatched == 5
    due.due_restore(items=[(pk, time.time() - 1) for pk in ids])  # a rebuild read them as SCHEDULED
    report = due_batch_dispatch()
    assert (report.claimed, report.dispatched) == (5, 0)
    assert published_ids() == {pk: 1 for pk in ids}
    assert get_redis().zcard(due.processing_key()) == 0


def test_a_late_acknowledgement_does_not_remove_another_claim(version):
    ids = _rows(version, 4, -1)
    first = due.due_claim(now=time.time(), limit=1000, lease_seconds=0.05)
    time.sleep(0.1)
    due.due_reap(now=time.time())
    second = due.due_claim(now=time.time(), limit=1000, lease_seconds=30)
    assert sorted(second.ids) == ids
    assert due.due_ack(claim=first, message_ids=first.ids) == 0
    assert get_redis().zcard(due.processing_key()) == 4
    assert due.due_ack(claim=second, message_ids=second.ids) == 4


def test_lock_has_one_holder_and_only_the_holder_releases_it(settings):
    first = DispatcherLock(ttl_seconds=0.3)
    second = DispatcherLock(ttl_seconds=0.3)
    assert first.acquire_or_refresh() and not second.acquire_or_refresh()
    assert first.acquire_or_refresh()  # refresh
    time.sleep(0.4)
    assert second.acquire_or_refresh()  # expired: taken over
    assert not first.acquire_or_refresh()
    assert not first.release() and second.release()


def test_rebuild_restores_scheduled_rows_once_and_skips_claimed_ids(version):
    ids = _rows(version, 1200, 3600)
    done = _rows(version, 2, -1)
    assert due_batch_dispatch().dispatched == 2
    get_redis().delete(due.due_key())
    claimed = ids[:3]
    get_redis().zadd(due.processing_key(), {str(pk): time.time() + 30 for pk in claimed})
    assert schedule_rebuild(batch_size=500, dry_run=True) == (1200, 1197)  # what the real run adds
    assert get_redis().zcard(due.due_key()) == 0
    assert schedule_rebuild(batch_size=500) == (1200, 1197)
    assert schedule_rebuild(batch_size=500) == (1200, 1197)  # re-scores, adds nothing new
    members = {int(m) for m in get_redis().zrange(due.due_key(), 0, -1)}
    assert members == set(ids[3:]) and not members & set(done)


def test_rebuild_schedule_dry_run_reports_the_count_the_real_run_adds(version):
    _rows(version, 1, 3600)
    get_redis().delete(due.due_key())  # Redis lost the due set

    def run(*flags: str) -> str:
        out = StringIO()
        call_command("rebuild_schedule", *flags, stdout=out)
        return out.getvalue().splitlines()[-1]

    dry_run = "1 scheduled messages; 1 would be added or re-scored (dry run, nothing written)"
    assert run("--dry-run") == dry_run
    assert get_redis().zcard(due.due_key()) == 0
    assert run() == "1 scheduled messages; 1 added or re-scored"
    assert get_redis().zcard(due.due_key()) == 1


def test_overdue_rows_missing_from_redis_are_swept_back_and_dispatched(version):
    lost = scheduled_rows_insert(version_id=version.id, count=3,
                                 due_at=timezone.now() - timedelta(minutes=5))  # never added to Redis
    recent = scheduled_rows_insert(version_id=version.id, count=2, due_at=timezone.now())
    assert overdue_schedule_restore(overdue_before=timezone.now() - timedelta(seconds=60)) == 3
    assert due_drain(budget_seconds=5).dispatched == 3
    assert set(published_ids()) == set(lost) and not set(published_ids()) & set(recent)

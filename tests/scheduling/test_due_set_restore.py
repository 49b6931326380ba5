"""The scheduler rebuilds a lost due set by itself (Redis restarted or flushed): from PostgreSQL,
a bounded step per tick, resumable by the next lock holder, started over when Redis loses it
again in the middle. Before, the due set stayed empty until an operator ran `rebuild_schedule`
or the overdue sweep found the rows 60-90 s late (the 1M day: P3 lateness p99 65 s)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from core.redis_client import get_redis
from scheduling.services import due
from scheduling.services.rebuild import due_set_restore_step
from testkit import processes
from testkit.waiting import wait_for
from tests import factories
from tests.scheduling.support import published_ids, scheduled_rows_insert

pytestmark = pytest.mark.django_db(transaction=True)


def _scheduled(count: int, due_in: float, spread: float = 0.0) -> list[int]:
    version = factories.template_version()
    return scheduled_rows_insert(version_id=version.id, count=count, spread_seconds=spread,
                                 due_at=timezone.now() + timedelta(seconds=due_in))


def _due_ids() -> set[int]:
    return {int(m) for m in get_redis().zrange(due.due_key(), 0, -1)}


def test_a_lost_due_set_is_rebuilt_once_and_then_left_alone():
    ids = _scheduled(1200, due_in=600)
    step = due_set_restore_step(budget_seconds=5, batch_size=500)
    assert step is not None and step.started and step.done
    assert _due_ids() == set(ids)
    assert due.due_set_built() == due.BUILT
    get_redis().zrem(due.due_key(), ids[0])  # intact from now on: no step reads PostgreSQL again
    assert due_set_restore_step(budget_seconds=5) is None
    assert ids[0] not in _due_ids()


def test_the_rebuild_goes_on_where_it_stopped():
    ids = _scheduled(1200, due_in=600)
    first = due_set_restore_step(budget_seconds=0, batch_size=500)  # a step of one batch
    assert first is not None and first.started and not first.done
    assert len(_due_ids()) == 500 and due.due_set_built() == str(sorted(ids)[499])
    steps = 1
    while (step := due_set_restore_step(budget_seconds=0, batch_size=500)) is not None:
        assert not step.started  # resumed, not started over
        steps += 1
        assert steps < 10
    assert _due_ids() == set(ids) and steps == 4  # 500 + 500 + 200 + the empty read that ends it


def test_redis_lost_again_in_the_middle_starts_the_rebuild_over():
    ids = _scheduled(1200, due_in=600)
    due_set_restore_step(budget_seconds=0, batch_size=500)
    get_redis().delete(due.due_key(), due.built_key())  # a second restart: the first 500 are gone
    step = due_set_restore_step(budget_seconds=5, batch_size=500)
    assert step is not None and step.started and step.done
    assert _due_ids() == set(ids)


@pytest.mark.e2e
def test_a_scheduler_rebuilds_a_flushed_due_set_and_sends_each_message_once_on_time(spawn, tmp_path):
    env = processes.subprocess_env(NOTIFIER_SCHEDULER_LOCK_TTL_SECONDS="2",
                                   NOTIFIER_REQUEUE_AFTER_SECONDS="3600")
    late = _scheduled(500, due_in=-5)  # due while Redis was down
    soon = _scheduled(5000, due_in=8, spread=2)
    get_redis().flushdb()  # no `rebuild_schedule`: the scheduler must notice on its own
    spawn(processes.scheduler(env, tmp_path)).wait_for_log("scheduler ready", timeout=60)
    assert wait_for(lambda: set(published_ids()) >= set(late), timeout=10, interval=0.2)
    assert not set(published_ids()) & set(soon)  # nothing early
    assert wait_for(lambda: set(published_ids()) == set(late) | set(soon), timeout=30, interval=0.2)
    time.sleep(1.5)
    counts = published_ids()
    assert {pk: n for pk, n in counts.items() if n > 1} == {}
    assert due.due_set_built() == due.BUILT

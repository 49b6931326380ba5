"""The whole path with real processes: the scheduler's sweep publishes, the callbacks pool (its
own queue, threads) posts; a receiver answering 500 then recovering gets every event once."""

from __future__ import annotations

import pytest

from callbacks.models import EndpointDelivery
from core.priorities import CALLBACKS_QUEUE
from core.worker import pool_kind, worker_argv
from testkit import processes
from testkit.waiting import wait_for
from tests.callbacks.conftest import record_events

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


def test_the_callbacks_pool_consumes_only_its_own_queue_on_threads():
    argv = worker_argv("callbacks")
    assert argv[argv.index("-Q") + 1] == CALLBACKS_QUEUE and pool_kind("callbacks") == "threads"
    for role in ("critical", "high", "normal", "low", "ops"):
        queues = worker_argv(role)[worker_argv(role).index("-Q") + 1].split(",")
        assert CALLBACKS_QUEUE not in queues


def test_the_scheduler_and_the_callbacks_pool_deliver_through_a_receiver_outage(
        process_env, spawn, tmp_path, endpoint, receiver):
    env = {**process_env, "NOTIFIER_CALLBACKS_BACKOFF_SECONDS": "0.2"}
    worker = spawn(processes.callbacks_worker(env, tmp_path, concurrency=2))
    scheduler = spawn(processes.scheduler(env, tmp_path))
    worker.wait_for_log("ready.", timeout=60)
    scheduler.wait_for_log("scheduler ready", timeout=60)

    receiver.status = 500
    ids = record_events(40)
    failing = EndpointDelivery.objects.filter(endpoint=endpoint, status_code=500)
    assert wait_for(lambda: failing.count() >= 3, timeout=60), worker.log()
    receiver.status = 200
    ids += record_events(40)
    accepted = receiver.wait_for_events(80, timeout=60)
    assert sorted(set(accepted)) == sorted(ids), "an event was lost"
    assert len(accepted) == len(ids), "an event was taken twice"

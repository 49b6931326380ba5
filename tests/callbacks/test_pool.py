"""The whole path with real processes: the scheduler's sweep publishes, the callbacks pool (its
own queue, threads) posts; a receiver answering 500 then recovering gets every event once."""

from __future__ import annotations

import time

import pytest

from callbacks.models import EndpointDelivery, WebhookEndpoint
from callbacks.services.dispatch import callbacks_dispatch_sweep
from core.priorities import CALLBACKS_QUEUE
from core.worker import pool_kind, worker_argv
from delivery.models import EmailMessage
from delivery.services.dispatch import messages_enqueue
from testkit import processes
from testkit.waiting import wait_for
from tests import factories
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


def test_a_slow_receiver_never_delays_an_otp(process_env, spawn, tmp_path, endpoint, receiver):
    """The callbacks pool's threads all wait on a receiver that answers in 4 s; an OTP sent
    meanwhile goes through its own queue and pool at its usual pace."""
    workers = [spawn(processes.callbacks_worker(process_env, tmp_path, concurrency=1)),
               spawn(processes.celery_worker("critical", process_env, tmp_path))]
    for worker in workers:
        worker.wait_for_log("ready.", timeout=60)
    receiver.delay_seconds = 4.0
    record_events(5)
    in_flight = WebhookEndpoint.objects.filter(pk=endpoint.pk, lease_token__isnull=False)

    def posting() -> bool:
        callbacks_dispatch_sweep()  # the scheduler's sweep, played here
        return in_flight.exists()

    assert wait_for(posting, timeout=60, interval=0.2)
    started = time.monotonic()
    message = factories.email_message(client=factories.owner(), priority=0)
    messages_enqueue(message_ids=[message.pk], priority=0)
    sent = EmailMessage.objects.filter(pk=message.pk, status=EmailMessage.Status.SENT)
    assert wait_for(sent.exists, timeout=3.0), "the OTP waited on the callbacks"
    assert in_flight.exists() and time.monotonic() - started < 4.0  # the receiver still had not answered

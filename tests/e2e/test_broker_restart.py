"""A worker keeps consuming through a restart of its Redis broker (no persistence).

kombu 5.7's Redis channel, closing after the connection dropped, tries to restore unacked
messages through a transport whose client is already gone and raises AttributeError; Celery
calls that "Unrecoverable error" and the whole worker exits (seen in the million-day scenario:
both P0 pools died at once, ~10 s without a P0 consumer). core/broker_compat.py tolerates it.
And it reconnects within a fraction of a second of the broker's return (core/worker_consumer.py).
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
import requests

from testkit import processes
from testkit.ports import free_port
from testkit.redis_server import dedicated_redis, wait_redis
from testkit.waiting import wait_for
from tests.support.streams import Stream
from tests.support.web import post_otp, wait_until_serving

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def broker_port() -> int:
    return free_port()


@pytest.fixture
def broker(broker_port, tmp_path):
    """A Redis of its own (no persistence), killed and restarted by the test."""
    server = dedicated_redis(broker_port, tmp_path).start()
    wait_redis(broker_port)
    yield server
    server.kill_group()


def _otp_stream(port: int, key: str, accepted: list[int]) -> Stream:
    """An OTP every 0.03 s; 503s (broker down) are retried like a client would, so every
    accepted id must arrive exactly once."""
    session = requests.Session()

    def send(n: int) -> requests.Response:
        response = post_otp(f"http://127.0.0.1:{port}", key, n, session, idempotency_key=f"otp-{n}")
        if response.status_code == 202:
            accepted.append(response.json()["id"])
        return response

    return Stream(send, interval=0.03, limit=2000, tries=50)


def test_worker_survives_redis_broker_restarts_under_load(broker, broker_port, process_env, api_key,
                                                         otp_template, smtp_server, spawn, tmp_path):
    env = {**process_env, "CELERY_BROKER_URL": f"redis://127.0.0.1:{broker_port}/0"}
    key = api_key  # the client that owns otp_template (templates belong to a client)
    port = free_port()
    spawn(processes.web_server(env, tmp_path, port))
    worker = spawn(processes.celery_worker("critical", env, tmp_path, concurrency=2))
    spawn(processes.scheduler(env, tmp_path))  # re-publishes what the restarts lost
    wait_until_serving(port)
    worker.wait_for_log("ready.")
    accepted: list[int] = []
    with _otp_stream(port, key, accepted) as stream:
        for _ in range(3):
            time.sleep(3)
            broker.kill_group()
            time.sleep(0.5)
            broker.start()
            wait_redis(broker_port)
        time.sleep(3)
    assert worker.process.poll() is None and "Unrecoverable error" not in worker.log(), (
        worker.log()[-4000:])
    # core/worker_consumer.py: retries 0.2 s, then 0.6 s after a refused connection (Celery
    # prints intervals under a second as "now"), not kombu's 2 s, 4 s, ...
    assert "Cannot connect" in worker.log() and "Trying again now" in worker.log(), worker.log()[-4000:]
    assert "Trying again in 2.00 seconds" not in worker.log()
    assert stream.errors == []  # 503 while the broker is down, never a 500
    expected = set(map(str, accepted))
    assert len(expected) > 100
    assert wait_for(lambda: expected <= set(smtp_server.handler.ids()), timeout=40)
    time.sleep(0.5)
    received = Counter(smtp_server.handler.ids())
    assert expected - set(received) == set()  # 0 lost
    assert [m for m, n in received.items() if n > 1] == []  # 0 duplicates

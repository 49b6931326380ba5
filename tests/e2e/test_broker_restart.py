"""A worker keeps consuming through a restart of its Redis broker (no persistence).

kombu 5.7's Redis channel, closing after the connection dropped, tries to restore unacked
messages through a transport whose client is already gone and raises AttributeError; Celery
calls that "Unrecoverable error" and the whole worker exits (seen in the million-day scenario:
both P0 pools died at once, ~10 s without a P0 consumer). core/broker_compat.py tolerates it.
And it reconnects within a fraction of a second of the broker's return (core/worker_consumer.py).
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
import requests

from testkit import processes
from testkit.ports import free_port
from testkit.redis_server import dedicated_redis, wait_redis
from testkit.waiting import wait_for
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


class OtpStream:
    """POST an OTP every `interval` s from a thread; 503s (broker down) are retried like a client
    would, so every accepted id must arrive exactly once."""

    def __init__(self, port: int, key: str, interval: float = 0.03) -> None:
        self.port, self.key, self.interval = port, key, interval
        self.accepted: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _post(self, session: requests.Session, n: int) -> None:
        for _ in range(50):
            response = post_otp(f"http://127.0.0.1:{self.port}", self.key, n, session,
                                idempotency_key=f"otp-{n}")
            if response.status_code == 202:
                self.accepted.append(response.json()["id"])
                return
            assert response.status_code == 503, response.text
            time.sleep(0.2)

    def _run(self) -> None:
        session, n = requests.Session(), 0
        while not self._stop.is_set() and n < 2000:
            self._post(session, n)
            n += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> OtpStream:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


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
    with OtpStream(port, key) as stream:
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
    expected = set(map(str, stream.accepted))
    assert len(expected) > 100
    assert wait_for(lambda: expected <= set(smtp_server.handler.ids()), timeout=40)
    time.sleep(0.5)
    received = Counter(smtp_server.handler.ids())
    assert expected - set(received) == set()  # 0 lost
    assert [m for m, n in received.items() if n > 1] == []  # 0 duplicates

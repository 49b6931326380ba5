"""A worker keeps consuming through a restart of its Redis broker (no persistence).

kombu 5.7's Redis channel, closing after the connection dropped, tries to restore unacked
messages through a transport whose client is already gone and raises AttributeError; Celery
calls that "Unrecoverable error" and the whole worker exits (seen in the million-day scenario:
both P0 pools died at once, ~10 s without a P0 consumer). notifier/broker.py tolerates it.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter

import pytest
import requests

from clients.services import api_client_create
from tests.support import processes
from tests.support.ports import free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e


class RedisServer:
    def __init__(self, port: int) -> None:
        self.port = port
        self.process: subprocess.Popen | None = None

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no"], stdout=subprocess.DEVNULL)
        assert wait_for(self._answers, timeout=10), "redis-server did not answer"
        return self

    def _answers(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_timeout=1).ping())
        except redis.ConnectionError:
            return False

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture
def broker():
    server = RedisServer(free_port()).start()
    yield server
    server.kill()


class OtpStream:
    """POST an OTP every `interval` s from a thread; 503s (broker down) are retried like a client
    would, so every accepted id must arrive exactly once."""

    def __init__(self, port: int, key: str, interval: float = 0.03) -> None:
        self.port, self.key, self.interval = port, key, interval
        self.accepted: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _post(self, session: requests.Session, n: int) -> None:
        body = {"to": f"user{n}@example.com", "template": "otp", "priority": "critical",
                "context": {"name": "Ada", "code": str(n)}, "idempotency_key": f"otp-{n}"}
        for _ in range(50):
            response = session.post(f"http://127.0.0.1:{self.port}/api/v1/messages", json=body,
                                    headers={"Authorization": f"Api-Key {self.key}"}, timeout=10)
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


def test_worker_survives_redis_broker_restarts_under_load(broker, process_env, otp_template,
                                                         smtp_server, spawn, tmp_path):
    env = {**process_env, "CELERY_BROKER_URL": f"redis://127.0.0.1:{broker.port}/0"}
    _, key = api_client_create(name="svc")
    port = free_port()
    web = spawn(processes.web_server(env, tmp_path, port))
    worker = spawn(processes.celery_worker("critical", env, tmp_path, concurrency=2))
    spawn(processes.scheduler(env, tmp_path))  # re-publishes what the restarts lost
    web.wait_for_log("Booting worker")
    worker.wait_for_log("ready.")
    with OtpStream(port, key) as stream:
        for _ in range(3):
            time.sleep(3)
            broker.kill()
            time.sleep(0.5)
            broker.start()
        time.sleep(3)
    assert worker.process.poll() is None and "Unrecoverable error" not in worker.log(), (
        worker.log()[-4000:])
    expected = set(map(str, stream.accepted))
    assert len(expected) > 100
    assert wait_for(lambda: expected <= set(smtp_server.handler.ids()), timeout=40)
    time.sleep(0.5)
    received = Counter(smtp_server.handler.ids())
    assert expected - set(received) == set()  # 0 lost
    assert [m for m, n in received.items() if n > 1] == []  # 0 duplicates

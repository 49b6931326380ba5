"""The pipeline through the real web process (the Procfile's), on each supported broker.

RabbitMQ and Redis behave differently where it matters (redelivery of unacked messages, queue
declaration), so the same path is proven on both.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter

import pytest
from kombu import Connection

from delivery.models import EmailMessage
from testkit import processes
from testkit.ports import free_port
from tests.support.web import post_otp, wait_until_serving

AMQP_URL = "amqp://guest:guest@127.0.0.1:5672//"


def _purge_amqp(queue: str) -> None:
    # On a fresh broker the queue does not exist yet: nothing to purge.
    with Connection(AMQP_URL, connect_timeout=5) as conn, contextlib.suppress(Exception):
        conn.channel().queue_purge(queue)


@pytest.fixture(params=["redis", "amqp"])
def broker_env(request, process_env) -> dict[str, str]:
    if request.param == "amqp":
        _purge_amqp("email-send-p0")
        return {**process_env, "CELERY_BROKER_URL": AMQP_URL}
    return process_env


def _wait_sent(message_id: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if EmailMessage.objects.get(pk=message_id).status == EmailMessage.Status.SENT:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.e2e
@pytest.mark.xdist_group("amqp")  # one RabbitMQ vhost: these tests share a worker
def test_critical_message_through_the_web_and_each_broker(broker_env, api_key, otp_template, smtp_server,
                                                          spawn, tmp_path):
    key = api_key  # the client that owns otp_template (templates belong to a client)
    port = free_port()
    spawn(processes.web_server(broker_env, tmp_path, port))
    worker = spawn(processes.celery_worker("critical", broker_env, tmp_path))
    wait_until_serving(port)
    worker.wait_for_log("ready.")
    sent_ids = []
    for n in range(5):
        response = post_otp(f"http://127.0.0.1:{port}", key, n)
        assert response.status_code == 202, response.text
        sent_ids.append(response.json()["id"])
    assert all(_wait_sent(message_id, timeout=15) for message_id in sent_ids)
    time.sleep(0.5)
    received = Counter(smtp_server.handler.ids())
    assert sorted(received) == sorted(map(str, sent_ids))  # 0 lost
    assert set(received.values()) == {1}  # 0 duplicates

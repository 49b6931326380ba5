"""The whole pipeline with real processes: HTTP API -> broker -> Celery worker -> SMTP server.

Counts lost and duplicate deliveries in every test, as docs/testing.md asks.
"""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest
import requests

from delivery.models import EmailMessage
from testkit import processes
from testkit.waiting import wait_for as _wait_for

pytestmark = pytest.mark.e2e
Status = EmailMessage.Status


def _post_otp(live_server, key: str, **extra) -> int:
    body = {"to": "ada@example.com", "template": "otp", "priority": "critical",
            "context": {"name": "Ada", "code": "424242"}, **extra}
    response = requests.post(f"{live_server.url}/api/v1/messages", json=body,
                             headers={"Authorization": f"Api-Key {key}"}, timeout=5)
    assert response.status_code == 202, response.text
    return response.json()["id"]




def _status(message_id: int) -> str:
    return EmailMessage.objects.get(pk=message_id).status


def _assert_delivered_exactly_once(smtp_server, message_ids: list[int]) -> None:
    received = Counter(smtp_server.handler.ids())
    lost = [m for m in message_ids if received[str(m)] == 0]
    duplicates = {m: n for m, n in received.items() if n > 1}
    assert (lost, duplicates) == ([], {})


def test_critical_message_arrives_within_5_seconds_exactly_once(
    live_server, api_key, otp_template, smtp_server, process_env, spawn, tmp_path
):
    worker = spawn(processes.celery_worker("critical", process_env, tmp_path))
    worker.wait_for_log("ready.")
    started = time.monotonic()
    message_id = _post_otp(live_server, api_key, idempotency_key="otp-1")
    assert _wait_for(lambda: smtp_server.handler.ids(), timeout=5)
    assert time.monotonic() - started < 5
    assert _wait_for(lambda: _status(message_id) == Status.SENT, timeout=5)
    _post_otp(live_server, api_key, idempotency_key="otp-1")  # a retried call sends nothing
    time.sleep(0.5)
    _assert_delivered_exactly_once(smtp_server, [message_id])
    message = EmailMessage.objects.get(pk=message_id)
    assert message.provider == "smtp" and message.provider_message_id
    received = smtp_server.handler.messages[0]
    assert received["Subject"] == "Your code 424242"
    assert message.provider_message_id == received["Message-ID"].strip("<>")


def test_worker_child_killed_between_claim_and_send_sends_exactly_once(
    live_server, api_key, otp_template, smtp_server, process_env, spawn, tmp_path
):
    env = {**process_env, "NOTIFIER_FAULT_PAUSE_AFTER_CLAIM": "2"}
    worker = spawn(processes.celery_worker("critical", env, tmp_path))
    worker.wait_for_log("ready.")
    message_id = _post_otp(live_server, api_key)
    assert _wait_for(lambda: _status(message_id) == Status.SENDING, timeout=5)
    children = worker.children()
    assert children, "prefork pool has a child process"
    for child in children:
        child.send_signal(signal.SIGKILL)
    # acks_late + reject_on_worker_lost: the broker redelivers; the same task re-claims the row.
    assert _wait_for(lambda: _status(message_id) == Status.SENT, timeout=15)
    time.sleep(0.5)
    _assert_delivered_exactly_once(smtp_server, [message_id])
    assert EmailMessage.objects.get(pk=message_id).attempts == 2


def test_whole_worker_killed_after_claim_is_recovered_after_restart(
    live_server, api_key, otp_template, smtp_server, process_env, spawn, tmp_path
):
    env = {**process_env, "NOTIFIER_FAULT_PAUSE_AFTER_CLAIM": "3", "NOTIFIER_CLAIM_LEASE_SECONDS": "2"}
    worker = spawn(processes.celery_worker("critical", env, tmp_path))
    worker.wait_for_log("ready.")
    message_id = _post_otp(live_server, api_key)
    assert _wait_for(lambda: _status(message_id) == Status.SENDING, timeout=5)
    worker.kill_group(signal.SIGKILL)  # main process and pool: the broker message stays unacked
    restarted_env = {**env, "NOTIFIER_FAULT_PAUSE_AFTER_CLAIM": "0"}
    spawn(processes.celery_worker("critical", restarted_env, tmp_path)).wait_for_log("ready.")
    spawn(processes.scheduler(restarted_env, tmp_path))  # its recovery loop requeues the claim
    assert _wait_for(lambda: _status(message_id) == Status.SENT, timeout=20)
    time.sleep(0.5)
    _assert_delivered_exactly_once(smtp_server, [message_id])


def test_worker_killed_while_the_provider_holds_the_message_is_ambiguous_never_resent(
    live_server, api_key, otp_template, smtp_server, process_env, spawn, tmp_path
):
    smtp_server.handler.hang_seconds = 4  # the server takes the body but does not answer yet
    env = {**process_env, "NOTIFIER_CLAIM_LEASE_SECONDS": "1", "NOTIFIER_AMBIGUOUS_AFTER_SECONDS": "2"}
    worker = spawn(processes.celery_worker("critical", env, tmp_path))
    worker.wait_for_log("ready.")
    message_id = _post_otp(live_server, api_key)
    # The body is at the server, its reply held: killed before that, the send journal proves the
    # message never left and it is rightly sent again (decision 92).
    assert _wait_for(lambda: smtp_server.handler.bodies_held >= 1, timeout=5)
    worker.kill_group(signal.SIGKILL)
    smtp_server.handler.hang_seconds = 0
    spawn(processes.celery_worker("critical", env, tmp_path)).wait_for_log("ready.")
    spawn(processes.scheduler(env, tmp_path))
    assert _wait_for(lambda: _status(message_id) == Status.AMBIGUOUS, timeout=15)
    time.sleep(2)
    assert _status(message_id) == Status.AMBIGUOUS
    assert Counter(smtp_server.handler.ids())[str(message_id)] <= 1

"""Send workers keep their PostgreSQL connection between tasks, and survive losing it.

Celery's Django fixup closes every connection around every task unless told otherwise; each
task then paid a new PostgreSQL backend (notifier/celery.py). This test watches the worker's
own backends through pg_stat_activity (libpq's PGAPPNAME names them).
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from django.db import connection

from delivery.models import EmailMessage
from testkit import processes
from testkit.waiting import wait_for
from tests.support.web import post_otp

pytestmark = pytest.mark.e2e
APP_NAME = "notifier-conn-reuse-test"


def _send_otp(live_server, key: str, n: int) -> int:
    response = post_otp(live_server.url, key, n)
    assert response.status_code == 202, response.text
    message_id = response.json()["id"]
    sent = wait_for(lambda: EmailMessage.objects.get(pk=message_id).status == EmailMessage.Status.SENT,
                    timeout=10)
    assert sent, EmailMessage.objects.get(pk=message_id).error
    return message_id


def _worker_backends() -> list[tuple[int, float]]:
    """(pid, backend start as epoch seconds) of the worker's open connections."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, extract(epoch FROM backend_start) FROM pg_stat_activity "
                       "WHERE application_name = %s", [APP_NAME])
        return [(pid, float(started)) for pid, started in cursor.fetchall()]


def test_worker_reuses_its_connection_and_reconnects_after_losing_it(
        live_server, api_key, otp_template, smtp_server, process_env, spawn, tmp_path):
    env = {**process_env, "PGAPPNAME": APP_NAME}
    worker = spawn(processes.celery_worker("critical", env, tmp_path, concurrency=1))
    worker.wait_for_log("ready.")
    sent = [_send_otp(live_server, api_key, 0)]
    after_first = time.time()
    sent += [_send_otp(live_server, api_key, n) for n in range(1, 10)]
    # One backend served all ten tasks: it is still open and older than the second task.
    backends = _worker_backends()
    assert [pid for pid, started in backends if started < after_first], backends

    with connection.cursor() as cursor:  # the database drops the worker's connections
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE application_name = %s", [APP_NAME])
    sent += [_send_otp(live_server, api_key, n) for n in range(10, 13)]
    time.sleep(0.5)
    received = Counter(smtp_server.handler.ids())
    assert sorted(received) == sorted(map(str, sent))  # 0 lost
    assert set(received.values()) == {1}  # 0 duplicates

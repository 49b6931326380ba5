"""The recovery's re-publish sweeps lock their rows in id order and skip the ones a worker holds:
they never wait on a row lock, so they cannot deadlock with a worker's multi-row claim or
hand-off. The 1M day (session 15): the re-publish after a broker restart and a P1 hand-off
deadlocked, the scheduler exited, and the restarted one had forgotten the restart (P3 lateness
p99 63 s). A deadlock is now also a conflict the loop runs again, not a reason to exit."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg2
import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from core.db_outage import transaction_conflict
from delivery.models import EmailMessage
from delivery.services import ledger
from tests.factories import email_message, template_version

pytestmark = pytest.mark.django_db(transaction=True)
TABLE = EmailMessage._meta.db_table


def _other_connection():
    params = connection.get_connection_params()
    conn = psycopg2.connect(**params)
    conn.autocommit = False
    return conn


def _queued(n: int) -> list[int]:
    version = template_version()
    ids = [email_message(version=version, priority=1).id for _ in range(n)]
    EmailMessage.objects.filter(id__in=ids).update(created_at=timezone.now() - timedelta(minutes=10))
    return ids


@pytest.mark.parametrize("sweep", ["broker_restart", "orphans"])
def test_a_sweep_skips_the_rows_a_worker_holds_and_never_waits(sweep):
    ids = _queued(4)
    worker = _other_connection()  # a worker's hand-off, in the middle of its transaction
    try:
        with worker.cursor() as cursor:
            cursor.execute(f"UPDATE {TABLE} SET error = 'held' WHERE id = %s", [ids[1]])
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")  # the old sweep waited here, then failed
        if sweep == "broker_restart":
            moved = ledger.queued_transactional_requeue(published_before=timezone.now())
        else:
            cutoff = {1: timezone.now() - timedelta(minutes=1)}
            moved = ledger.orphaned_messages_claim_requeue(older_than=cutoff)
        assert sorted(pk for pk, _ in moved) == [ids[0], ids[2], ids[3]]
    finally:
        worker.rollback()
        worker.close()
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")


def test_a_real_deadlock_reads_as_a_transaction_conflict():
    first, second = _queued(2)
    a, b = _other_connection(), _other_connection()
    errors: list[BaseException] = []
    try:
        a.cursor().execute(f"UPDATE {TABLE} SET error = 'a' WHERE id = %s", [first])
        b.cursor().execute(f"UPDATE {TABLE} SET error = 'b' WHERE id = %s", [second])

        def cross(conn, pk):
            try:
                conn.cursor().execute(f"UPDATE {TABLE} SET error = 'x' WHERE id = %s", [pk])
            except psycopg2.Error as exc:
                errors.append(exc)
                conn.rollback()

        threads = [threading.Thread(target=cross, args=(a, second)),
                   threading.Thread(target=cross, args=(b, first))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        a.rollback(), b.rollback()
        a.close(), b.close()
    assert len(errors) == 1 and transaction_conflict(errors[0])
    wrapped = OperationalError("deadlock detected")
    wrapped.__cause__ = errors[0]
    assert transaction_conflict(wrapped)  # as Django raises it
    assert not transaction_conflict(OperationalError("server closed the connection"))

"""The dashboard's provider health reads the last 15 minutes of attempts, however long the
history: the id bound keeps older partitions out of the plan and the BRIN index on created_at
narrows the newest (measured on a month of history in docs/benchmarks.md, issue 30)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from analytics.selectors.queues import provider_health
from core.partitions.catalog import partitions_of
from core.partitions.create import days_ensure
from core.partitions.spec import day_floor, day_number, registered_table
from delivery.models import DeliveryAttempt
from tests.factories import email_message, template_version

pytestmark = pytest.mark.django_db
TABLE = DeliveryAttempt._meta.db_table
OLD_DAYS = 40
DAY_ROWS = 100_000
COLUMNS = "provider, outcome, response_code, error, duration_ms, created_at, message_id"


def _attempts(message_id: int, *, day: int, count: int, at, outcome: str) -> None:
    """`count` attempts of day number `day` (their ids carry it) made at `at`."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} (id, {COLUMNS}) "
            f"SELECT %s + g, 'sendgrid', %s, '', '', 100, %s, %s FROM generate_series(1, %s) g",
            [day_floor(day) + 1_000_000, outcome, at, message_id, count])


def _attempts_of_today(message_id: int, *, count: int, until) -> None:
    """`count` attempts in id order, made evenly from `until - 12 h` (or today's start) to `until`."""
    start = max(until - timedelta(hours=12), until.replace(hour=0, minute=0, second=0, microsecond=0))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} ({COLUMNS}) "
            f"SELECT 'sendgrid', 'accepted', '', '', 80, %s + (%s - %s) * (g::float / %s), %s "
            f"FROM generate_series(1, %s) g", [start, until, start, count, message_id, count])


@pytest.fixture
def old_and_recent_attempts() -> None:
    now = timezone.now()
    old_day = day_number(now) - OLD_DAYS
    with transaction.atomic(), connection.cursor() as cursor:
        days_ensure(cursor, registered_table(TABLE), [old_day])
    message = email_message(version=template_version())
    _attempts(message.id, day=old_day, count=300, at=now - timedelta(days=OLD_DAYS), outcome="permanent")
    # A busy day before the window: the newest partition holds many rows the window must skip.
    _attempts_of_today(message.id, count=DAY_ROWS, until=now - timedelta(minutes=20))
    DeliveryAttempt.objects.bulk_create(
        [DeliveryAttempt(message_id=message.id, provider="sendgrid", outcome=outcome, duration_ms=50)
         for outcome in ["accepted"] * 8 + ["transient"] * 2])
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {TABLE}")


def test_only_the_window_is_counted(old_and_recent_attempts):
    health = {row["provider"]: row for row in provider_health()}
    assert (health["sendgrid"]["attempts"], health["sendgrid"]["failed"]) == (10, 2)
    assert health["sendgrid"]["latency_p95_ms"] == 50.0


def test_older_partitions_are_left_out_of_the_plans(old_and_recent_attempts):
    with connection.cursor() as cursor:
        old_partition = partitions_of(cursor, TABLE)[0].name
    with CaptureQueriesContext(connection) as captured:
        provider_health()
    reads = [q["sql"] for q in captured.captured_queries if TABLE in q["sql"]]
    (sql,) = reads  # the counts and the durations' histogram of each minute not kept
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert old_partition not in plan, plan
    assert "attempt_created_brin" in plan, plan


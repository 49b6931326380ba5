"""The dashboard's recent failures: the newest by claim time, read from msg_status_claimed_idx, so
an install that has not failed for a while does not walk every row sent since (decision 138)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from analytics.dashboard.selectors import recent_failures
from clients.key_types import KeyType
from delivery.models import EmailMessage
from tests.feedback.helpers import sent_messages

pytestmark = pytest.mark.django_db


@pytest.fixture
def failures_then_many_sends() -> list[int]:
    """2,000 failures, then 5,000 sends: the primary key's walk back looks cheap to the planner
    (2 rows in 7 failed) and reads every send. The last 20 failures were claimed in the reverse
    of their id order, a minute apart, the newest a test key's."""
    now = timezone.now()
    sent_messages(1980, status="FAILED", prefix="older")
    EmailMessage.objects.filter(status="FAILED").update(claimed_at=now - timedelta(hours=2))
    failed = sent_messages(20, status="FAILED", prefix="failed")
    for minutes, message in enumerate(failed):
        EmailMessage.objects.filter(pk=message.pk).update(claimed_at=now - timedelta(minutes=minutes))
    EmailMessage.objects.filter(pk=failed[0].pk).update(key_type=KeyType.TEST)
    sent_messages(5000)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {EmailMessage._meta.db_table}")
    return [m.pk for m in failed]


def test_the_newest_failures_first_and_no_test_key(failures_then_many_sends):
    newest_first = failures_then_many_sends[1:16]
    assert [row["id"] for row in recent_failures()] == newest_first


def test_the_read_is_the_status_index_not_the_primary_key(failures_then_many_sends):
    with CaptureQueriesContext(connection) as captured:
        recent_failures()
    (sql,) = [q["sql"] for q in captured.captured_queries if "FAILED" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "status_claimed" in plan, plan
    assert "pkey" not in plan, plan

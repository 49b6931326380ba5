"""The send path's server-side prepared statements read the partitions of their rows only, in
the generic plan PostgreSQL switches to after five executions (decision 133).

A prepared statement's parameters are unknown when its generic plan is made, so the partitions
are pruned when it starts, and only by scalar parameters: `id = ANY($1)` with an array kept every
partition in the plan (the hand-off mark probed each week's primary key: 0.16 -> 0.61 ms per OTP
with a month of history). Each statement is PREPAREd here as `execute_prepared` does outside a
test's transaction, with `plan_cache_mode = force_generic_plan`, and its EXPLAIN may scan the
partition of today only.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from django.db import connection

from core.partitions.create import days_ensure
from core.partitions.spec import day_number, partition_name, span_start
from delivery.models import EmailMessage
from delivery.partitioning import MESSAGES
from delivery.services.ledger.prepared import _numbered
from delivery.services.ledger.send_reads import messages_claim_for_send, messages_queued_read_for_send
from delivery.services.ledger.single_message import message_claim_for_send, message_mark_started
from delivery.services.ledger.sql import placeholders
from tests import factories
from tests.plans import statements_of

pytestmark = pytest.mark.django_db

TODAY = day_number(datetime.now(UTC))
OLD_DAYS = (TODAY - 21, TODAY - 14, TODAY - 7)


def _generic_plan(sql: str, params: list) -> str:
    """EXPLAIN of `sql` as a prepared statement's generic plan, run with `params`."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute("DEALLOCATE ALL")
        cursor.execute(f"PREPARE pruning_probe AS {_numbered(sql)}")
        cursor.execute(f"EXPLAIN EXECUTE pruning_probe ({placeholders(params)})", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def _scanned_partitions(call: Callable[[], object]) -> set[str]:
    """The message partitions the generic plan of each statement `call` runs would scan."""
    scanned: set[str] = set()
    for sql, params in statements_of(call):
        if "delivery_emailmessage" not in sql or not params:
            continue
        plan = _generic_plan(sql, list(params))
        for line in plan.splitlines():
            if "Scan" in line and " on delivery_emailmessage_" in line:
                scanned.add(line.split(" on ")[1].split()[0])
    return scanned


@pytest.fixture
def old_weeks() -> set[str]:
    """Three past weeks' partitions besides today's: what the plans must not read."""
    with connection.cursor() as cursor:
        days_ensure(cursor, MESSAGES, OLD_DAYS)
    return {partition_name(MESSAGES.table, span_start(day)) for day in OLD_DAYS}


def _today_partition() -> str:
    return partition_name(MESSAGES.table, span_start(TODAY))


def test_the_single_message_hand_off_reads_its_rows_partition_only(old_weeks):
    message = factories.email_message(status=EmailMessage.Status.SENDING, claim_token="t")
    scanned = _scanned_partitions(lambda: message_mark_started(message_id=message.pk, token="t"))
    assert scanned == {_today_partition()}
    assert not scanned & old_weeks


def test_the_single_message_claim_reads_its_rows_partition_only(old_weeks):
    message = factories.email_message()
    scanned = _scanned_partitions(lambda: message_claim_for_send(message_id=message.pk, token="t"))
    assert scanned == {_today_partition()}


@pytest.mark.parametrize("size", [1, 3])
def test_a_batchs_read_and_claim_read_their_rows_partitions_only(old_weeks, size):
    ids = [factories.email_message().pk for _ in range(size)]
    assert _scanned_partitions(lambda: messages_queued_read_for_send(message_ids=ids)) == {_today_partition()}
    assert _scanned_partitions(lambda: messages_claim_for_send(message_ids=ids, token="t")) == {
        _today_partition()}

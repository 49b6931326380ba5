"""A week of old history dropped while a campaign sends (issue 30, decision 122): real workers
send a 3,000-recipient campaign to an SMTP server on 127.0.0.1 while `expire_data` detaches
(CONCURRENTLY) and drops a week of 2,000 old messages and their attempts. Every recipient gets
the campaign exactly once, and the drop finishes while the sends go on (it takes no lock a
send waits on)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from campaigns.models import Campaign
from core.partitions.create import days_ensure
from core.partitions.spec import day_floor, day_number, partition_name, span_start
from delivery.models import EmailMessage
from delivery.partitioning import ATTEMPTS, MESSAGES
from feedback.partitioning import EVENTS, MARKS
from testkit.waiting import wait_for
from tests import factories
from tests.campaigns.test_campaign_e2e import (  # the campaign scenarios' own steps
    _counters,
    _group,
    _launch,
    _received,
    _status,
    _workers,
    campaign_template,  # noqa: F401  (fixture)
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
OLD_ROWS = 2000


def _old_week_of_history() -> int:
    """2,000 sent messages and their attempts in a week 20 weeks ago; its first day."""
    week = span_start(day_number(datetime.now(UTC)) - 140)
    with connection.cursor() as cursor:
        for spec in (MESSAGES, ATTEMPTS, EVENTS, MARKS):
            days_ensure(cursor, spec, [week])
    seed = factories.email_message(version=factories.template_version(), status="SENT")
    columns = [f.column for f in EmailMessage._meta.concrete_fields if f.column != "id"]
    copied = ", ".join(columns).replace("idempotency_key", "idempotency_key || g")
    midday = datetime(1970, 1, 1, 12, tzinfo=UTC) + timedelta(days=week)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {MESSAGES.table} (id, {', '.join(columns)}) SELECT %s + g, {copied} "
            f"FROM {MESSAGES.table}, generate_series(1, {OLD_ROWS}) g WHERE id = %s",
            [day_floor(week), seed.pk])
        cursor.execute(
            f"UPDATE {MESSAGES.table} SET created_at = %s WHERE id >= %s AND id < %s",
            [midday, day_floor(week), day_floor(week + 7)])
        cursor.execute(
            f"INSERT INTO {ATTEMPTS.table} (id, message_id, provider, outcome, response_code, error, "
            f"duration_ms, created_at) SELECT id, id, 'smtp', 'accepted', '250', '', 5, created_at "
            f"FROM {MESSAGES.table} WHERE id >= %s AND id < %s", [day_floor(week), day_floor(week + 7)])
    seed.delete()
    return week


def test_an_old_week_dropped_while_a_campaign_sends_loses_and_repeats_nothing(
    live_server, api_key, campaign_template, smtp_server, process_env, spawn, tmp_path, settings,  # noqa: F811
):
    settings.NOTIFIER_RETENTION_METADATA_DAYS = 90
    week = _old_week_of_history()
    segment = _group("drop", 3000, 0)
    # 2 ms per message at the server: the campaign is still sending when the drop runs.
    smtp_server.handler.hang_seconds, smtp_server.handler.hang_from = 0.002, 0
    _workers(spawn, process_env, tmp_path)
    campaign = _launch(live_server, api_key, segment, campaign_template.template_id)
    assert wait_for(lambda: _counters(campaign)["sent"] >= 300, timeout=60)

    out, started = StringIO(), time.monotonic()
    call_command("expire_data", stdout=out)
    took = time.monotonic() - started
    for spec in (MESSAGES, ATTEMPTS):
        assert f"dropped {partition_name(spec.table, week)}" in out.getvalue(), out.getvalue()
    sending_during_drop = _counters(campaign)["sent"] < 3000
    assert not EmailMessage.objects.filter(id__gte=day_floor(week), id__lt=day_floor(week + 7)).exists()

    assert wait_for(lambda: _status(campaign) == Campaign.Status.COMPLETED, timeout=180, interval=1)
    received = _received(smtp_server)
    expected = {f"drop-{i}@example.com" for i in range(3000)}
    lost = expected - set(received)
    duplicates = {to: n for to, n in received.items() if n > 1}
    assert (len(lost), duplicates, set(received) - expected) == (0, {}, set())
    assert _counters(campaign)["sent"] == 3000
    assert sending_during_drop, f"the campaign finished before the drop ended ({took:.1f} s)"

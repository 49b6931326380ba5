"""F4: 10,000 sends scheduled 48 h ahead (the catalogue's 50k, scaled to its 10k per test): no
broker message carries a far ETA, and each is dispatched once, at its due time.

Real processes throughout: the API (in-process), the fan-out (ops worker), the due set in Redis,
the scheduler, a P2 worker and an SMTP sink on 127.0.0.1. A campaign to a 10,000-contact segment
and 50 single messages are scheduled 48 h ahead through the API. The broker is then read where a
far ETA would hide: every queue, and kombu's `unacked` hash, where a worker keeps each ETA task it
holds in memory (Celery's countdown/eta). A far ETA there is the failure this fault is about: on
Redis such a task comes back after every visibility timeout, to every worker, and lives in worker
memory for two days.

"At due time" without waiting 48 h: the scheduler reads the time from the clock (its own claim)
and from PostgreSQL (`statement_timestamp()` in the fence), and neither is ours to move. So the
test moves the due times instead, as if the 48 h had passed: each row's `scheduled_for` and its
due-set score, the two places a due time lives, brought to a few seconds from now. Then each
message must reach the sink exactly once, none before its due time (the fence's stamp and the
hand-off against `scheduled_for`) and none long after.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from audience.models import Segment
from campaigns.models import Campaign
from core.redis_client import get_redis
from delivery.models import EmailMessage
from scheduling.services import due
from testkit import processes
from testkit.waiting import wait_for
from tests import factories
from tests.campaigns.helpers import contacts_create
from tests.support.broker_messages import BrokerMessage, broker_messages

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
MS = EmailMessage.Status
AHEAD = timedelta(hours=48)
AUDIENCE = 10_000
SINGLE = 50
NEAR_ETA = timedelta(minutes=2)  # a retry's or a deferral's countdown (the retry cap) at most
ON_TIME = timedelta(seconds=15)  # dispatch of 10,050 rows on a loaded 2-core machine


def _start(spawn, env: dict[str, str], tmp_path) -> None:
    started = [spawn(processes.ops_worker(env, tmp_path, concurrency=1)),
               spawn(processes.celery_worker("normal", env, tmp_path, concurrency=2))]
    scheduler = spawn(processes.scheduler(env, tmp_path))
    for worker in started:
        worker.wait_for_log("ready.", timeout=60)
    scheduler.wait_for_log("scheduler ready", timeout=60)


def _schedule_campaign(api, send_at: datetime) -> Campaign:
    contacts_create(AUDIENCE, prefix="far-", attributes={"group": "far"})
    segment = Segment.objects.create(client=factories.owner(), name="far", definition={
        "conditions": [{"attribute": "group", "op": "equals", "value": "far"}]})
    template = factories.template_version(subject="Sale for {{ name }}", html_body="<p>Hello {{ name }}</p>")
    body = {"template_id": template.template_id, "priority": "normal",
            "schedule": {"type": "scheduled", "send_at": send_at.isoformat()},
            "recipients": {"type": "segment", "segment_id": segment.pk}}
    response = api.post("/api/v1/notifications/email", body, format="json")
    assert response.status_code == 202, response.content
    return Campaign.objects.get(pk=response.json()["campaign_id"])


def _schedule_singles(api, send_at: datetime) -> list[int]:
    ids = []
    for n in range(SINGLE):
        body = {"to": f"single{n}@example.com", "template": "otp", "priority": "normal",
                "context": {"name": "Ada", "code": str(n)},
                "schedule": {"type": "scheduled", "send_at": send_at.isoformat()}}
        response = api.post("/api/v1/messages", body, format="json")
        assert response.status_code == 202, response.content
        ids.append(response.json()["id"])
    return ids


def _far_or_ours(ids: set[int]) -> list[BrokerMessage]:
    """Broker messages (queues and unacked) with an ETA past a retry's, or carrying our ids."""
    horizon = timezone.now() + NEAR_ETA
    return [m for m in broker_messages()
            if (m.eta is not None and m.eta > horizon)
            or (m.task == "delivery.send_batch" and ids.intersection(m.args[0]))]


def _due_scores(ids: list[int]) -> set[float | None]:
    return set(get_redis().zmscore(due.due_key(), [str(pk) for pk in ids]))


def _as_if_time_passed(ids: list[int], shift: timedelta) -> None:
    """Every due time `shift` earlier, in the record and in the due set (the 48 h went by)."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {EmailMessage._meta.db_table} SET scheduled_for = scheduled_for - %s "
                       "WHERE id = ANY(%s) AND status = %s", [shift, ids, MS.SCHEDULED])
        assert cursor.rowcount == len(ids)
    rows = EmailMessage.objects.filter(id__in=ids).values_list("id", "scheduled_for")
    due.messages_schedule(items=list(rows))  # re-scores the same members


def _late_or_early(ids: list[int]) -> list[tuple]:
    """Rows fenced (dispatched) before their due time or long after it, or handed to the ESP
    before it."""
    rows = EmailMessage.objects.filter(id__in=ids).values_list("id", "scheduled_for", "requeued_at",
                                                               "send_started_at")
    return [(pk, due_at, fenced, started) for pk, due_at, fenced, started in rows
            if fenced is None or started is None or not due_at <= fenced <= due_at + ON_TIME
            or started < due_at]


def test_sends_48_hours_ahead_hold_no_broker_eta_and_go_once_at_their_time(
    api, otp_template, smtp_server, process_env, spawn, tmp_path
):
    _start(spawn, process_env, tmp_path)
    send_at = (timezone.now() + AHEAD).replace(microsecond=0)
    campaign = _schedule_campaign(api, send_at)
    singles = _schedule_singles(api, send_at)
    assert wait_for(lambda: Campaign.objects.get(pk=campaign.pk).fanout_done, timeout=60, interval=0.2)
    ids = singles + list(EmailMessage.objects.filter(campaign=campaign).values_list("id", flat=True))
    assert len(ids) == AUDIENCE + SINGLE
    time.sleep(3)  # the scheduler and the workers have looked at least a few times

    waiting = EmailMessage.objects.filter(id__in=ids, status=MS.SCHEDULED, scheduled_for=send_at)
    assert waiting.count() == len(ids)
    assert _due_scores(ids) == {send_at.timestamp()}  # each waits in the due set, not the broker
    assert _far_or_ours(set(ids)) == []
    assert smtp_server.handler.ids() == []

    due_at = timezone.now() + timedelta(seconds=5)
    _as_if_time_passed(ids, send_at - due_at)
    time.sleep(max(0.0, (due_at - timezone.now()).total_seconds() - 0.5))
    assert smtp_server.handler.ids() == []  # nothing before its time
    assert wait_for(lambda: len(smtp_server.handler.ids()) >= len(ids), timeout=120, interval=0.5), (
        len(smtp_server.handler.ids()))
    time.sleep(1)
    received = Counter(map(int, smtp_server.handler.ids()))
    lost, duplicates = set(ids) - set(received), {pk: n for pk, n in received.items() if n > 1}
    assert (len(lost), duplicates, set(received) - set(ids)) == (0, {}, set())
    assert EmailMessage.objects.filter(id__in=ids, status=MS.SENT).count() == len(ids)
    assert _late_or_early(ids) == []
    assert get_redis().zcard(due.due_key()) == get_redis().zcard(due.processing_key()) == 0

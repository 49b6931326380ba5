"""Reads of delivery state for the API, the dashboard and the admin (no writes here)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

import redis
from django.db import connection
from django.db.models import QuerySet

from core.priorities import Priority
from core.redis_client import get_redis
from delivery.models import DeadLetter, EmailMessage
from delivery.providers import provider_order
from delivery.services.circuit_breaker import events_key, state_key
from delivery.services.provider_faults import fault_key

MESSAGE_TABLE = EmailMessage._meta.db_table


@dataclass(frozen=True)
class BreakerState:
    provider: str
    state: str  # closed | open | half_open | unknown (Redis unreachable)
    open_for_seconds: float
    recent_failures: int
    transitions: list[str]  # newest first: "<epoch ms> closed -> open (5 failures in 10000 ms)"
    # The same permanent error for everyone (delivery/services/provider_faults.py): its
    # signature while it lasts, "" otherwise. The dashboard's alert turns critical on it.
    fault: str = ""


def circuit_breakers_list() -> list[BreakerState]:
    """One entry per configured provider, in failover order."""
    return [circuit_breaker_get(name) for name in provider_order()]


def circuit_breaker_get(name: str) -> BreakerState:
    """One provider's breaker, read from Redis; state 'unknown' when Redis is unreachable."""
    try:
        client = get_redis()
        raw = {k.decode(): v.decode() for k, v in client.hgetall(state_key(name)).items()}
        events = [line.decode() for line in client.lrange(events_key(name), 0, 19)]
        fault = (client.hget(fault_key(name), "sig") or b"").decode()
    except redis.RedisError:
        return BreakerState(name, "unknown", 0.0, 0, [])
    state = raw.get("state", "closed")
    until_ms = float(raw.get("until") or 0)
    remaining = max(0.0, until_ms / 1000 - time.time()) if state == "open" else 0.0
    return BreakerState(name, state, round(remaining, 3), int(raw.get("failures") or 0), events, fault)


def dead_letters_pending(*, since: datetime | None = None) -> QuerySet[DeadLetter]:
    """Dead letters not yet requeued, oldest first."""
    rows = DeadLetter.objects.filter(requeued_at__isnull=True).order_by("id")
    return rows.filter(created_at__gte=since) if since else rows


@dataclass(frozen=True)
class QueueBacklog:
    pending: int  # QUEUED: waiting for a worker
    processing: int  # SENDING: claimed by a worker
    oldest_age_seconds: float | None  # the longest a pending message has waited; None: none waits


# A message waits from the moment it may be sent: its creation, or its due time if it was
# scheduled. Not `requeued_at`: recovery re-stamps it on every re-publish of a stuck row, which
# made a message lost for minutes look seconds old; not `created_at` alone: a send scheduled a
# day ahead looked a day late the moment it fell due.
_BACKLOG_SQL = f"""
SELECT priority, count(*) FILTER (WHERE status = 'QUEUED'), count(*) FILTER (WHERE status = 'SENDING'),
       min(CASE WHEN scheduled_for > created_at THEN scheduled_for ELSE created_at END)
         FILTER (WHERE status = 'QUEUED')
FROM {MESSAGE_TABLE} WHERE status IN ('QUEUED', 'SENDING') GROUP BY priority
"""


def queue_backlogs(*, now: datetime) -> dict[Priority, QueueBacklog]:
    """Per priority, in one GROUP BY: the one definition the dashboard, the overview API,
    /metrics and the schedules API share."""
    with connection.cursor() as cursor:
        cursor.execute(_BACKLOG_SQL)
        rows = {row[0]: row[1:] for row in cursor.fetchall()}
    backlogs = {}
    for priority in Priority:
        pending, processing, oldest = rows.get(int(priority), (0, 0, None))
        age = round(max(0.0, (now - oldest).total_seconds()), 3) if oldest else None
        backlogs[priority] = QueueBacklog(pending, processing, age)
    return backlogs

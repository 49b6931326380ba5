"""Queue depth and age per priority, live workers per queue, provider health (reads only).

Broker depth (core.broker_queues) counts *tasks* (batches), while `pending` counts messages
(QUEUED rows). Pending, processing and oldest age come from
`delivery.selectors.queue_backlogs`, shared with the schedules API.

Redis keys read here:
    notifier:analytics:workers         cached `celery inspect active_queues` (JSON, short TTL)
                                       (string or hash field "state"); absent -> "unknown"
"""

from __future__ import annotations

import contextlib
import json
import logging
from datetime import datetime, timedelta
from typing import Any

import redis
from celery import current_app
from django.conf import settings
from django.db import connection
from django.db.models import Count, Q
from django.db.models.functions import TruncMinute
from django.utils import timezone

from clients.key_types import KeyType
from core.broker_queues import broker_depths
from core.partitions.routing import id_floor_since
from core.priorities import ALL_QUEUES, POOLS, Priority
from core.redis_client import get_redis, redis_key
from delivery.models import DeliveryAttempt, EmailMessage
from delivery.selectors import circuit_breaker_get, queue_backlogs
from delivery.services.sandbox import SANDBOX_PROVIDER

logger = logging.getLogger(__name__)
ATTEMPTS_TABLE = DeliveryAttempt._meta.db_table


def alert_level(*, oldest_age: float | None, sla_seconds: int) -> str:
    """The SLA state: how long the oldest pending message has waited against the queue's SLA.

    The backlog's size is not part of it: a 50,000-row campaign on the low queue whose oldest
    row is 3 s old is on time (it used to show "warning" past 10,000 rows).
    """
    age = oldest_age or 0.0
    if age > sla_seconds:
        return "critical"
    if age > sla_seconds / 2:
        return "warning"
    return "ok"


def priority_queues() -> list[dict[str, Any]]:
    """One entry per priority: pending, processing, broker depth, oldest age, SLA state."""
    backlogs = queue_backlogs(now=timezone.now())
    depths = broker_depths()
    result = []
    for priority, pool in POOLS.items():
        backlog = backlogs[priority]
        result.append({
            "priority": priority.label, "queue": pool.queue, "pending": backlog.pending,
            "processing": backlog.processing, "broker_tasks": depths.get(pool.queue),
            "oldest_age_seconds": backlog.oldest_age_seconds, "sla_seconds": pool.sla_seconds,
            "alert": alert_level(oldest_age=backlog.oldest_age_seconds, sla_seconds=pool.sla_seconds),
        })
    return result


def minute_buckets(*, since: datetime, now: datetime) -> list[str]:
    """Every minute from since's to now's (ISO, as TruncMinute's): a chart must plot a minute
    without rows as 0, not draw a line between the minutes that had some."""
    minute = since.replace(second=0, microsecond=0)
    buckets = []
    while minute <= now:
        buckets.append(minute.isoformat())
        minute += timedelta(minutes=1)
    return buckets


def throughput_last_hour() -> dict[str, Any]:
    """Messages sent per priority over the last hour, total and per minute (every minute);
    live figures: a test key's messages (settled by the sandbox, issue 27) are not counted."""
    now = timezone.now()
    since = now - timedelta(hours=1)
    sent = EmailMessage.objects.filter(sent_at__gte=since).exclude(key_type=KeyType.TEST)
    totals = dict(sent.values_list("priority").annotate(n=Count("id")))
    labels = [p.label for p in Priority]
    series = {t: dict.fromkeys(labels, 0) for t in minute_buckets(since=since, now=now)}
    rows = sent.annotate(t=TruncMinute("sent_at")).values_list("t", "priority").annotate(n=Count("id"))
    for at, priority, n in rows:
        series.setdefault(at.isoformat(), dict.fromkeys(labels, 0))[Priority(priority).label] = n
    return {
        "per_priority": {p.label: totals.get(int(p), 0) for p in Priority},
        "per_minute": [{"t": t, **v} for t, v in sorted(series.items())],
    }


def live_workers() -> dict[str, list[str]]:
    """Worker names per queue from `celery inspect` (short timeout), cached briefly in Redis."""
    key = redis_key("analytics", "workers")
    try:
        cached = get_redis().get(key)
    except redis.RedisError:
        cached = None
    if cached:
        return json.loads(cached)
    workers: dict[str, list[str]] = {q: [] for q in ALL_QUEUES}
    try:
        # The project's Celery app (notifier/celery.py sets itself current when Django loads the
        # project package): an app names no configuration module.
        replies = current_app.control.inspect(timeout=0.5).active_queues() or {}
    except Exception:
        logger.warning("celery inspect failed", exc_info=True)
        replies = {}
    for worker, queues in replies.items():
        for queue in queues:
            workers.setdefault(queue["name"], []).append(worker)
    with contextlib.suppress(redis.RedisError):
        get_redis().set(key, json.dumps(workers), ex=max(1, settings.FEEDBACK_WORKERS_CACHE_SECONDS))
    return workers


def provider_health(*, minutes: int = 15) -> list[dict[str, Any]]:
    """Per provider over the last minutes: attempts, error rate, latency, breaker state, fault.
    The sandbox is no provider: its simulated answers are left out."""
    since = timezone.now() - timedelta(minutes=minutes)
    rows = (
        _attempts_since(since).exclude(provider=SANDBOX_PROVIDER)
        .values_list("provider")
        .annotate(
            attempts=Count("id"),
            failed=Count("id", filter=~Q(outcome=DeliveryAttempt.Outcome.ACCEPTED)),
        )
    )
    stats = {p: (a, f) for p, a, f in rows}
    latency = _latency_p95(since)
    health = []
    for name in sorted(set(settings.NOTIFIER_PROVIDERS) | set(stats)):
        attempts, failed = stats.get(name, (0, 0))
        breaker = circuit_breaker_get(name)
        error_rate = round(failed / attempts, 4) if attempts else 0.0
        health.append({
            "provider": name, "attempts": attempts, "failed": failed, "error_rate": error_rate,
            "latency_p95_ms": latency.get(name), "breaker": breaker.state, "fault": breaker.fault,
            "alert": provider_alert(fault=breaker.fault, attempts=attempts, error_rate=error_rate),
        })
    return health


def provider_alert(*, fault: str, attempts: int, error_rate: float) -> str:
    """critical in a provider fault (it refuses every message the same way) or when it fails too
    many of its calls over the window. A minimum sample keeps one failed call out of two from
    turning the whole dashboard red."""
    if fault:
        return "critical"
    if attempts >= settings.FEEDBACK_PROVIDER_ALERT_MIN_ATTEMPTS and (
        error_rate >= settings.FEEDBACK_PROVIDER_ERROR_RATE_ALERT
    ):
        return "critical"
    return "ok"


def _attempts_since(since: datetime):
    """The attempts made since `since`: the id bound keeps older partitions out of the plan, the
    BRIN index on created_at (attempt_created_brin) the older block ranges of the newest."""
    floor = id_floor_since(ATTEMPTS_TABLE, since)
    return DeliveryAttempt.objects.filter(id__gte=floor, created_at__gte=since)


def _latency_p95(since) -> dict[str, float]:
    """95th percentile of provider call time (ms) per provider."""
    sql = (
        f"SELECT provider, percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) "
        f"FROM {ATTEMPTS_TABLE} WHERE id >= %s AND created_at >= %s AND provider <> %s GROUP BY provider"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [id_floor_since(ATTEMPTS_TABLE, since), since, SANDBOX_PROVIDER])
        return {provider: round(float(value), 1) for provider, value in cursor.fetchall()}

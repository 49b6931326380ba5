"""Queue depth and age per priority, live workers per queue, provider health (reads only).

Broker depth (core.broker_queues) counts *tasks* (batches), while `pending` counts messages
(QUEUED rows). Pending, processing and oldest age come from
`delivery.selectors.queue_backlogs`, shared with the schedules API.

Redis keys read here:
    notifier:analytics:workers         cached `celery inspect active_queues` (JSON, short TTL)
                                       (string or hash field "state"); absent -> "unknown"
    notifier:analytics:throughput:<minute epoch>, notifier:analytics:provider_calls:<minute epoch>
                                       a settled minute's live sends per priority, provider calls
                                       per provider (kept_minutes.py, decisions 135 and 138)
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
from django.db.models import Count
from django.utils import timezone

from analytics.selectors.campaign_stats import UtcMinute
from analytics.selectors.kept_minutes import Counts, MinuteSeries, series_window, summed
from clients.key_types import KeyType
from core import live_counts
from core.broker_queues import broker_depths
from core.live_counts import provider_call_name, provider_calls_add
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


def throughput_last_hour() -> dict[str, Any]:
    """Messages sent per priority over the last hour, total and per minute (every minute);
    live figures: a test key's messages (settled by the sandbox, issue 27) are not counted.

    The hour is whole UTC minutes: from the minute now - 1 h falls in to the current one (61
    minutes, the last still open), and the totals are the sums of those minutes. Settled minutes
    are counted once and kept in Redis (analytics/selectors/kept_minutes.py, decision 135).
    """
    series = series_window(SENDS)
    return {
        "per_priority": summed(series),
        "per_minute": [{"t": m.isoformat(), **series[m]} for m in sorted(series)],
    }


def sent_per_minute(since: datetime, until: datetime | None = None) -> dict[datetime, Counts]:
    """Live sends per UTC minute and priority label from `since` (to `until`), one GROUP BY over
    msg_sent_at_idx; a minute without sends is absent."""
    rows = EmailMessage.objects.filter(sent_at__gte=since).exclude(key_type=KeyType.TEST)
    if until is not None:
        rows = rows.filter(sent_at__lt=until)
    grouped = rows.annotate(t=UtcMinute("sent_at")).values_list("t", "priority").annotate(n=Count("id"))
    per_minute: dict[datetime, Counts] = {}
    for minute, priority, n in grouped.order_by():
        per_minute.setdefault(minute, _no_sends())[Priority(priority).label] = n
    return per_minute


def _no_sends() -> dict[str, int]:
    return dict.fromkeys((p.label for p in Priority), 0)


SENDS = MinuteSeries(live_counts.SENDS, timedelta(hours=1), sent_per_minute, empty=_no_sends)


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


def provider_health() -> list[dict[str, Any]]:
    """Per provider over the last quarter of an hour (whole UTC minutes, kept as the sends are):
    attempts, error rate, latency p95, breaker state, fault. The sandbox is no provider: its
    simulated answers are left out."""
    calls = summed(series_window(PROVIDER_CALLS))
    health = []
    providers = {name.split(live_counts.CALLS_SEPARATOR)[0] for name in calls}
    for name in sorted(set(settings.NOTIFIER_PROVIDERS) | providers):
        attempts = calls.get(provider_call_name(name, "attempts"), 0)
        failed = calls.get(provider_call_name(name, "failed"), 0)
        breaker = circuit_breaker_get(name)
        error_rate = round(failed / attempts, 4) if attempts else 0.0
        health.append({
            "provider": name, "attempts": attempts, "failed": failed, "error_rate": error_rate,
            "latency_p95_ms": latency_percentile(calls, name, 0.95),
            "breaker": breaker.state, "fault": breaker.fault,
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


def provider_calls_per_minute(since: datetime, until: datetime | None = None) -> dict[datetime, Counts]:
    """Provider calls per UTC minute from `since` (to `until`): per provider its attempts, its
    failed ones, and its calls per duration (`ms<=N`, core.live_counts.duration_bucket: the
    percentile of a window is read from the sum of its minutes' histograms). One GROUP BY; the id
    bound keeps older partitions out of the plan, the BRIN index on created_at
    (attempt_created_brin) the older block ranges of the newest."""
    bound = "AND created_at < %s" if until is not None else ""
    sql = (
        f"SELECT date_bin('1 minute', created_at, TIMESTAMPTZ '1970-01-01 00:00:00+00'), provider, "
        f"outcome <> %s, {live_counts.DURATION_BUCKET_SQL}, count(*) FROM {ATTEMPTS_TABLE} "
        f"WHERE id >= %s AND created_at >= %s {bound} AND provider <> %s GROUP BY 1, 2, 3, 4"
    )
    params = [DeliveryAttempt.Outcome.ACCEPTED, id_floor_since(ATTEMPTS_TABLE, since), since,
              *([until] if until is not None else []), SANDBOX_PROVIDER]
    per_minute: dict[datetime, Counts] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for minute, provider, failed, bucket, n in cursor.fetchall():
            provider_calls_add(per_minute.setdefault(minute, {}), provider, accepted=not failed,
                               bucket=bucket, n=n)
    return per_minute


def latency_percentile(calls: dict[str, int], provider: str, fraction: float) -> float | None:
    """The smallest duration bucket that holds `fraction` of the provider's calls (None without
    calls): nearest rank, read to two significant digits (a 123 ms call counts as 130 ms)."""
    prefix = provider_call_name(provider, "ms<=")
    buckets = sorted((int(name[len(prefix):]), n) for name, n in calls.items() if name.startswith(prefix))
    total = sum(n for _, n in buckets)
    if not total:
        return None
    seen = 0
    for upper, n in buckets:
        seen += n
        if seen >= fraction * total:
            return float(upper)
    return float(buckets[-1][0])


PROVIDER_CALLS = MinuteSeries(live_counts.PROVIDER_CALLS, timedelta(minutes=15), provider_calls_per_minute)

"""Helpers for the scheduling tests: fast bulk rows, reading what reached the broker."""

from __future__ import annotations

import base64
import json
import uuid
from collections import Counter
from datetime import datetime

from django.db import connection

from core.priorities import SEND_QUEUES
from core.redis_client import get_redis
from delivery.models import EmailMessage
from scheduling.services import due
from scheduling.services.lock import lock_key

TABLE = EmailMessage._meta.db_table


def clear_schedule_keys() -> None:
    get_redis().delete(due.due_key(), due.processing_key(), due.built_key(), lock_key())


def clear_send_queues() -> None:
    client = get_redis()
    for queue in SEND_QUEUES:
        for key in client.scan_iter(match=f"{queue}*"):
            client.delete(key)


def published_ids() -> Counter:
    """Message ids in every send task waiting on the broker (kombu's Redis transport keeps a
    queue as a list, one JSON envelope per task with a base64 body [args, kwargs, embed])."""
    client = get_redis()
    counts: Counter = Counter()
    for queue in SEND_QUEUES:
        for key in client.scan_iter(match=f"{queue}*"):
            for raw in client.lrange(key, 0, -1):
                envelope = json.loads(raw)
                args, _kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
                counts.update(args[0])
    return counts


def scheduled_rows_insert(*, version_id: int, count: int, due_at: datetime, spread_seconds: float = 0,
                          priority: int = 2, tag: str | None = None) -> list[int]:
    """INSERT ... SELECT generate_series: `count` SCHEDULED rows, due from `due_at` spread over
    `spread_seconds`; returns their ids in id order."""
    sql = (
        f"INSERT INTO {TABLE} (recipient, context, template_version_id, priority, status, provider, "
        "provider_message_id, attempts, idempotency_key, claim_token, error, created_at, "
        "scheduled_for, cancel_key) "
        "SELECT 'u' || g || '@example.com', '{}'::jsonb, %s, %s, 'SCHEDULED', '', '', 0, "
        "%s || ':' || g, '', '', now(), %s + (g %% 1000) * (%s / 1000.0) * interval '1 second', '' "
        "FROM generate_series(1, %s) g RETURNING id"
    )
    tag = tag or f"bulk-{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(sql, [version_id, priority, tag, due_at, spread_seconds, count])
        ids = sorted(row[0] for row in cursor.fetchall())
        cursor.execute(f"ANALYZE {TABLE}")  # as autovacuum would after a bulk insert
        return ids


def schedule_rows(ids: list[int]) -> None:
    rows = EmailMessage.objects.filter(id__in=ids).values_list("id", "scheduled_for")
    due.messages_schedule(items=list(rows))

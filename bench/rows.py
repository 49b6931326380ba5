"""Rows and Redis keys the benchmark scripts write in bulk with SQL, and remove afterwards (they
run against a scratch database). Needs Django set up (bench.harness.django_setup)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from django.db import connection

from audience.models import Contact
from bench.owner import bench_client
from core.priorities import SEND_QUEUES
from core.redis_client import get_redis
from delivery.models import EmailMessage
from scheduling.services import due
from templates.services import template_create

MESSAGES = EmailMessage._meta.db_table
CONTACTS = Contact._meta.db_table
_CHUNK = 50_000  # ids per Redis command


def scheduled_messages_insert(count: int, *, priority: int, key_prefix: str, due_sql: str,
                              due_params: Sequence[object] = ()) -> tuple[int, int]:
    """COUNT SCHEDULED rows to u<n>@example.com (n = 1..COUNT), idempotency key
    `<key_prefix>:<n>`, due at `due_sql` (SQL over `g`, the row's n); (lowest id, highest id)."""
    version = template_create(client=bench_client(), name=f"bench-{key_prefix}", subject="s",
                              html_body="<p>b</p>")
    sql = (
        f"INSERT INTO {MESSAGES} (recipient, context, template_version_id, priority, status, provider, "
        "provider_message_id, attempts, idempotency_key, claim_token, error, created_at, "
        f"scheduled_for, cancel_key) SELECT 'u' || g || '@example.com', '{{}}'::jsonb, %s, %s, "
        f"'SCHEDULED', '', '', 0, %s || ':' || g, '', '', now(), {due_sql}, '' "
        "FROM generate_series(1, %s) g"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [version.id, priority, key_prefix, *due_params, count])
        cursor.execute(f"ANALYZE {MESSAGES}")  # as autovacuum would after a bulk insert
        cursor.execute(f"SELECT min(id), max(id) FROM {MESSAGES} WHERE idempotency_key LIKE %s",
                       [f"{key_prefix}:%"])
        return cursor.fetchone()


def contacts_insert(count: int, zones: list[str], email_prefix: str,
                    attributes: dict[str, object]) -> tuple[int, int]:
    """COUNT contacts <email_prefix><n>@example.com spread over `zones` in turn, each with
    `attributes`; (lowest id, highest id)."""
    sql = (
        f"INSERT INTO {CONTACTS} (client_id, email, name, timezone, locale, attributes, subscribed, "
        "created_at, updated_at) SELECT %s, %s || g || '@example.com', '', (%s::text[])[1 + g %% %s], "
        "'', %s::jsonb, true, now(), now() FROM generate_series(1, %s) g"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [bench_client().pk, email_prefix, zones, len(zones), json.dumps(attributes),
                             count])
        cursor.execute(f"ANALYZE {CONTACTS}")
        cursor.execute(f"SELECT min(id), max(id) FROM {CONTACTS} WHERE email LIKE %s", [f"{email_prefix}%"])
        return cursor.fetchone()


def due_set_remove(ids: Sequence[int]) -> None:
    for start in range(0, len(ids), _CHUNK):
        get_redis().zrem(due.due_key(), *ids[start:start + _CHUNK])


def send_queues_clear() -> None:
    """Delete the send queues (and kombu's priority sub-queues) the run published into."""
    redis = get_redis()
    for queue in SEND_QUEUES:
        for key in redis.scan_iter(match=f"{queue}*"):
            redis.delete(key)

"""Benchmark: schedule COUNT recipients at 09:00 in each one's own timezone (compute + insert).

    DATABASE_URL=... REDIS_URL=... python bench/local_time_fanout.py --count 1000000 --zones 300

Setup (not timed): COUNT contacts spread over ZONES IANA timezones. Timed: (1) the distinct
timezones of the audience (one SQL), (2) one UTC instant per timezone (scheduling.timing),
(3) one INSERT ... SELECT joining the audience to that VALUES table (SCHEDULED rows with
`scheduled_for`), (4) adding every new id to the Redis due set (server-side cursor, ZADD in
chunks). Everything is deleted afterwards (scratch database).
"""

from __future__ import annotations

import argparse
import sys
import time
import zoneinfo
from datetime import time as wall_time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.owner import bench_client

harness.django_setup()

from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.rows import CONTACTS, MESSAGES, contacts_insert, due_set_remove  # noqa: E402
from scheduling import timing  # noqa: E402
from scheduling.services import due  # noqa: E402
from templates.services import template_create  # noqa: E402


def _insert_messages(low: int, high: int, version_id: int, tag: str, now) -> dict[str, float]:
    marks = {}
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT timezone FROM {CONTACTS} WHERE id BETWEEN %s AND %s", [low, high])
        names = [row[0] for row in cursor.fetchall()]
    marks["distinct timezones (SQL)"] = time.perf_counter() - started
    started = time.perf_counter()
    due_at = timing.due_by_timezone(wall_time(9), names, now=now)
    values, params = timing.due_values_sql(due_at)
    marks[f"due instants for {len(names)} zones"] = time.perf_counter() - started
    started = time.perf_counter()
    sql = (
        f"INSERT INTO {MESSAGES} (recipient, context, template_version_id, priority, status, provider, "
        "provider_message_id, attempts, idempotency_key, claim_token, error, created_at, scheduled_for, "
        "cancel_key, contact_id) SELECT c.email, '{}'::jsonb, %s, 3, 'SCHEDULED', '', '', 0, "
        f"%s || c.id, '', '', now(), due.due_at, '', c.id FROM {CONTACTS} c JOIN {values} "
        "ON due.timezone = c.timezone WHERE c.id BETWEEN %s AND %s"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [version_id, f"lt:{tag}:", *params, low, high])
    marks["INSERT ... SELECT messages"] = time.perf_counter() - started
    return marks


def _add_to_due_set(tag: str) -> float:
    started = time.perf_counter()
    with transaction.atomic(), connection.chunked_cursor() as cursor:
        cursor.execute(f"SELECT id, scheduled_for FROM {MESSAGES} WHERE idempotency_key LIKE %s",
                       [f"lt:{tag}:%"])
        while rows := cursor.fetchmany(20_000):
            due.messages_schedule(items=rows)
    return time.perf_counter() - started


def _cleanup(low: int, high: int, tag: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {MESSAGES} WHERE idempotency_key LIKE %s", [f"lt:{tag}:%"])
        ids = [row[0] for row in cursor.fetchall()]
        cursor.execute(f"DELETE FROM {MESSAGES} WHERE idempotency_key LIKE %s", [f"lt:{tag}:%"])
        cursor.execute(f"DELETE FROM {CONTACTS} WHERE id BETWEEN %s AND %s", [low, high])
    due_set_remove(ids)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--zones", type=int, default=300)
    args = parser.parse_args()
    zones = sorted(zoneinfo.available_timezones())[: args.zones]
    tag = str(int(time.time()))
    low, high = contacts_insert(args.count, zones, f"lt{tag}-", {})
    version = template_create(
        client=bench_client(), name=f"bench-lt-{tag}", subject="s", html_body="<p>b</p>")
    try:
        marks = _insert_messages(low, high, version.id, tag, timezone.now())
        marks["ZADD into the due set"] = _add_to_due_set(tag)
        for name, seconds in marks.items():
            print(f"  {name}: {seconds:.2f}s")
        total = sum(marks.values())
        print(f"local_time for {args.count} recipients in {len(zones)} zones: {total:.1f}s total")
    finally:
        _cleanup(low, high, tag)


if __name__ == "__main__":
    main()

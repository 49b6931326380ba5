"""Benchmark: dispatch rate of a due backlog (Redis due set -> Postgres fence -> broker).

    DATABASE_URL=... REDIS_URL=... python bench/dispatch_backlog.py --count 1000000 [--priority low]

Inserts COUNT SCHEDULED rows already due (INSERT ... SELECT generate_series), adds them to the
due set, then times the dispatcher draining them in one process exactly as run_scheduler does
(claim 1000 -> guarded UPDATE -> publish batch tasks -> acknowledge). Prints the rate. The rows
and the published tasks are deleted afterwards. Use a scratch database: it writes rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifier.settings")

import django

django.setup()

from django.db import connection  # noqa: E402

from bench.owner import bench_client  # noqa: E402
from core.priorities import SEND_QUEUES, Priority  # noqa: E402
from core.redis_client import get_redis  # noqa: E402
from delivery.models import EmailMessage  # noqa: E402
from scheduling.services import due  # noqa: E402
from scheduling.services.dispatcher import due_drain  # noqa: E402
from templates.services import template_create  # noqa: E402

TABLE = EmailMessage._meta.db_table


def _insert(count: int, priority: int, tag: str) -> tuple[int, int]:
    version = template_create(client=bench_client(), name=f"bench-{tag}", subject="s", html_body="<p>b</p>")
    sql = (
        f"INSERT INTO {TABLE} (recipient, context, template_version_id, priority, status, provider, "
        "provider_message_id, attempts, idempotency_key, claim_token, error, created_at, "
        "scheduled_for, cancel_key) SELECT 'u' || g || '@example.com', '{}'::jsonb, %s, %s, "
        "'SCHEDULED', '', '', 0, %s || ':' || g, '', '', now(), now() - interval '1 second', '' "
        "FROM generate_series(1, %s) g"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [version.id, priority, f"bench:{tag}", count])
        cursor.execute(f"ANALYZE {TABLE}")  # as autovacuum would after a bulk insert
        cursor.execute(f"SELECT min(id), max(id) FROM {TABLE} WHERE idempotency_key LIKE %s",
                       [f"bench:{tag}:%"])
        return cursor.fetchone()


def _zadd(low: int, high: int) -> None:
    redis = get_redis()
    score = time.time() - 1
    for start in range(low, high + 1, 50_000):
        redis.zadd(due.due_key(), {str(i): score for i in range(start, min(start + 50_000, high + 1))})


def _cleanup(low: int, high: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE id BETWEEN %s AND %s", [low, high])
    redis = get_redis()
    for queue in SEND_QUEUES:
        for key in redis.scan_iter(match=f"{queue}*"):
            redis.delete(key)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--priority", default="low", choices=[p.label for p in Priority])
    parser.add_argument("--threads", type=int, default=None, help="default: the setting (3)")
    args = parser.parse_args()
    tag = str(int(time.time()))
    t0 = time.perf_counter()
    low, high = _insert(args.count, int(Priority.from_label(args.priority)), tag)
    t1 = time.perf_counter()
    _zadd(low, high)
    t2 = time.perf_counter()
    print(f"setup: insert {t1 - t0:.1f}s, zadd {t2 - t1:.1f}s")
    report = due_drain(budget_seconds=3600, threads=args.threads)
    elapsed = time.perf_counter() - t2
    print(f"dispatched {report.dispatched} of {args.count} ({args.priority}) in {elapsed:.2f}s: "
          f"{report.dispatched / elapsed:,.0f}/s")
    _cleanup(low, high)


if __name__ == "__main__":
    main()

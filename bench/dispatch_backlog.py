"""Benchmark: dispatch rate of a due backlog (Redis due set -> Postgres fence -> broker).

    DATABASE_URL=... REDIS_URL=... python bench/dispatch_backlog.py --count 1000000 [--priority low]

Inserts COUNT SCHEDULED rows already due (INSERT ... SELECT generate_series), adds them to the
due set, then times the dispatcher draining them in one process exactly as run_scheduler does
(claim 1000 -> guarded UPDATE -> publish batch tasks -> acknowledge). Prints the rate. The rows
and the published tasks are deleted afterwards. Use a scratch database: it writes rows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness

harness.django_setup()

from django.db import connection  # noqa: E402

from bench.rows import MESSAGES, scheduled_messages_insert, send_queues_clear  # noqa: E402
from core.priorities import Priority  # noqa: E402
from core.redis_client import get_redis  # noqa: E402
from scheduling.services import due  # noqa: E402
from scheduling.services.dispatcher import due_drain  # noqa: E402


def _zadd(low: int, high: int) -> None:
    redis = get_redis()
    score = time.time() - 1
    for start in range(low, high + 1, 50_000):
        redis.zadd(due.due_key(), {str(i): score for i in range(start, min(start + 50_000, high + 1))})


def _cleanup(low: int, high: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {MESSAGES} WHERE id BETWEEN %s AND %s", [low, high])
    send_queues_clear()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--priority", default="low", choices=[p.label for p in Priority])
    parser.add_argument("--threads", type=int, default=None, help="default: the setting (3)")
    args = parser.parse_args()
    tag = str(int(time.time()))
    t0 = time.perf_counter()
    low, high = scheduled_messages_insert(
        args.count, priority=int(Priority.from_label(args.priority)), key_prefix=f"bench:{tag}",
        due_sql="now() - interval '1 second'")
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

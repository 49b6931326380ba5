"""Benchmark: dispatch lateness under a steady stream of due messages.

    DATABASE_URL=... REDIS_URL=... python bench/dispatch_lateness.py --rate 2000 --seconds 30

Inserts RATE x SECONDS SCHEDULED rows whose due times are spread evenly over SECONDS (starting
3 s from now), adds them to the due set, starts a real `manage.py run_scheduler` process and
waits until every row is QUEUED. Lateness = the database time of the fencing UPDATE
(`requeued_at`) minus `scheduled_for`, per row; prints p50/p99/max. Target: due messages leave
within 2 s of their time. Rows and published tasks are deleted afterwards (scratch database).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifier.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402

from bench.owner import bench_client  # noqa: E402
from core.priorities import SEND_QUEUES  # noqa: E402
from core.redis_client import get_redis  # noqa: E402
from delivery.models import EmailMessage  # noqa: E402
from scheduling.services import due  # noqa: E402
from templates.services import template_create  # noqa: E402

TABLE = EmailMessage._meta.db_table


def _insert(count: int, seconds: float, tag: str) -> tuple[int, int]:
    version = template_create(client=bench_client(), name=f"bench-{tag}", subject="s", html_body="<p>b</p>")
    sql = (
        f"INSERT INTO {TABLE} (recipient, context, template_version_id, priority, status, provider, "
        "provider_message_id, attempts, idempotency_key, claim_token, error, created_at, "
        "scheduled_for, cancel_key) SELECT 'u' || g || '@example.com', '{}'::jsonb, %s, 3, "
        "'SCHEDULED', '', '', 0, %s || ':' || g, '', '', now(), "
        "now() + interval '3 seconds' + (g * %s / %s) * interval '1 second', '' "
        "FROM generate_series(1, %s) g"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [version.id, f"lat:{tag}", seconds, count, count])
        cursor.execute(f"ANALYZE {TABLE}")
        cursor.execute(f"SELECT min(id), max(id) FROM {TABLE} WHERE idempotency_key LIKE %s",
                       [f"lat:{tag}:%"])
        return cursor.fetchone()


def _schedule(low: int, high: int) -> None:
    for start in range(low, high + 1, 50_000):
        rows = EmailMessage.objects.filter(id__gte=start, id__lt=start + 50_000, id__lte=high)
        due.messages_schedule(items=rows.values_list("id", "scheduled_for"))


def _pending(low: int, high: int) -> int:
    return EmailMessage.objects.filter(id__gte=low, id__lte=high, status="SCHEDULED").count()


def _lateness(low: int, high: int) -> tuple[float, float, float, int]:
    sql = (
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x), percentile_cont(0.99) WITHIN GROUP "
        "(ORDER BY x), max(x), count(*) FILTER (WHERE x < 0) FROM (SELECT extract(epoch FROM "
        f"requeued_at - scheduled_for) AS x FROM {TABLE} WHERE id BETWEEN %s AND %s) s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [low, high])
        return cursor.fetchone()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()
    count = int(args.rate * args.seconds)
    low, high = _insert(count, args.seconds, str(int(time.time())))
    _schedule(low, high)
    scheduler = subprocess.Popen([sys.executable, "manage.py", "run_scheduler"], cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + args.seconds + 60
        while _pending(low, high) and time.monotonic() < deadline:
            time.sleep(1)
    finally:
        scheduler.terminate()
        scheduler.wait(timeout=30)
    p50, p99, worst, early = _lateness(low, high)
    print(f"{count} messages due at {args.rate}/s over {args.seconds:.0f}s: lateness p50 {p50:.3f}s, "
          f"p99 {p99:.3f}s, max {worst:.3f}s, early {early}")
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE id BETWEEN %s AND %s", [low, high])
    get_redis().delete(due.due_key(), due.processing_key())
    for queue in SEND_QUEUES:
        for key in get_redis().scan_iter(match=f"{queue}*"):
            get_redis().delete(key)


if __name__ == "__main__":
    main()

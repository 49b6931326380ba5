"""Benchmark: the dashboard's `throughput_last_hour()` cold, warm and without Redis (decision 135).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/7 \\
        .venv/bin/python bench/dashboard_throughput.py [--sends 200000] [--calls 7] \\
        [--database dash_throughput] [--keep | --reuse]

Makes its own database (--database on DATABASE_URL's server, migrated) holding --sends SENT
messages whose sent_at spreads evenly over the hour before the load (priorities in turn, one in 20
from a test key), by one INSERT .. SELECT over generate_series, then VACUUM ANALYZE. Then, each
--calls times, in-process (medians, and the spread):
- previous: the function as it was before decision 135 (two GROUP BYs over the whole hour, copied
  here for the comparison);
- cold: the first call, nothing kept (its minutes forgotten before each call): one GROUP BY over
  the hour, and the settled minutes written to Redis;
- warm: a repeated call (the settled minutes kept): the database counts the open minutes only;
- no Redis: the shared client pointed at a closed port: the hour counted on every call.
Each figure is the call's wall time, and the time of its database statements. The answers are
checked equal (cold, warm, no Redis). Redis keys go under a prefix of this run; the database is
dropped at the end unless --keep (--reuse measures a kept one without loading).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.harness import sql

NAME = "dash-throughput"


def load(sends: int) -> None:
    """The service, its template and `sends` SENT messages over the last hour."""
    from clients.services import service_create
    from templates.services import template_create

    service, _ = service_create(name=NAME, rate_limit="1000000/min")
    version = template_create(client=service, name="t", subject="Hi", html_body="<p>Hi</p>")
    sql("""
        INSERT INTO delivery_emailmessage (client_id, recipient, context, template_version_id, priority,
          status, provider, provider_message_id, attempts, idempotency_key, claim_token, error,
          created_at, claimed_at, sent_at, cancel_key, key_type, stream)
        SELECT %(service)s, 'd' || g || '@example.com', '{}'::jsonb, %(version)s, g %% 4, 'SENT',
          'sendgrid', 'sg-' || g, 1, 'dash:' || g, '', '', t.at, t.at, t.at, '',
          CASE WHEN g %% 20 = 0 THEN 'test' ELSE 'live' END, 'transactional'
        FROM generate_series(1, %(sends)s) g,
        LATERAL (SELECT now() - interval '1 hour' + g * (interval '1 hour' / %(sends)s) AS at) t""",
        {"service": service.pk, "version": version.pk, "sends": sends})
    sql("VACUUM ANALYZE delivery_emailmessage")


def previous_throughput() -> dict[str, Any]:
    """throughput_last_hour before decision 135, as it was (for the comparison only)."""
    from django.db.models import Count
    from django.db.models.functions import TruncMinute
    from django.utils import timezone

    from analytics.selectors.kept_minutes import minute_range
    from clients.key_types import KeyType
    from core.live_counts import minute_of
    from core.priorities import Priority
    from delivery.models import EmailMessage

    now = timezone.now()
    since = now - timedelta(hours=1)
    sent = EmailMessage.objects.filter(sent_at__gte=since).exclude(key_type=KeyType.TEST)
    totals = dict(sent.values_list("priority").annotate(n=Count("id")))
    labels = [p.label for p in Priority]
    minutes = minute_range(first=minute_of(since), last=minute_of(now))
    series = {m.isoformat(): dict.fromkeys(labels, 0) for m in minutes}
    rows = sent.annotate(t=TruncMinute("sent_at")).values_list("t", "priority").annotate(n=Count("id"))
    for at, priority, n in rows:
        series.setdefault(at.isoformat(), dict.fromkeys(labels, 0))[Priority(priority).label] = n
    return {"per_priority": {p.label: totals.get(int(p), 0) for p in Priority},
            "per_minute": [{"t": t, **v} for t, v in sorted(series.items())]}


def timed(call: Callable[[], Any], before: Callable[[], None], calls: int) -> dict[str, Any]:
    """`calls` calls of `call`, `before()` ahead of each (untimed): wall and database ms."""
    from django.db import connection

    walls, dbs, answer = [], [], None
    for _ in range(calls):
        before()
        spent: list[float] = []

        def on_query(execute, sql_text, params, many, context, spent=spent):
            began = time.perf_counter()
            try:
                return execute(sql_text, params, many, context)
            finally:
                spent.append((time.perf_counter() - began) * 1000)

        with connection.execute_wrapper(on_query):
            began = time.perf_counter()
            answer = call()
            walls.append((time.perf_counter() - began) * 1000)
        dbs.append(sum(spent))
    return {"wall_ms": statistics.median(walls), "db_ms": statistics.median(dbs),
            "walls": [round(w, 1) for w in walls], "answer": answer}


def measure(calls: int) -> dict[str, dict[str, Any]]:
    from django.conf import settings

    from analytics.selectors.kept_minutes import series_forget
    from analytics.selectors.queues import SENDS, throughput_last_hour
    from core.redis_client import get_redis
    from testkit.ports import free_port

    results = {"previous": timed(previous_throughput, lambda: None, calls),
               "cold": timed(throughput_last_hour, lambda: series_forget(SENDS), calls)}
    throughput_last_hour()  # keeps the settled minutes
    results["warm"] = timed(throughput_last_hour, lambda: None, calls)
    working = settings.REDIS_URL
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    get_redis.cache_clear()
    try:
        results["no Redis"] = timed(throughput_last_hour, lambda: None, calls)
    finally:
        settings.REDIS_URL = working
        get_redis.cache_clear()
        series_forget(SENDS)
    return results


def report(results: dict[str, dict[str, Any]], calls: int) -> None:
    answers = [results[name]["answer"] for name in ("cold", "warm", "no Redis")]
    # Minute by minute, over the minutes all three windows hold (a minute may have ended between).
    common = set.intersection(*({point["t"] for point in a["per_minute"]} for a in answers))
    same = all(sorted((p for p in a["per_minute"] if p["t"] in common), key=lambda p: p["t"])
               == sorted((p for p in answers[0]["per_minute"] if p["t"] in common), key=lambda p: p["t"])
               for a in answers)
    hour = sum(answers[0]["per_priority"].values())
    print(f"live sends in the window now: {hour:,} (test keys out); "
          f"cold, warm and no-Redis minutes equal ({len(common)} in common): {same}; "
          f"load average {harness.loadavg()}")
    print(f"{'call':10} {'wall p50':>9} {'db p50':>8}   walls (ms), {calls} calls")
    for name, figures in results.items():
        print(f"{name:10} {figures['wall_ms']:9.1f} {figures['db_ms']:8.1f}   {figures['walls']}")
    if not same:
        raise SystemExit("the answers differ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sends", type=int, default=200_000)
    parser.add_argument("--calls", type=int, default=7)
    parser.add_argument("--database", default="dash_throughput")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument("--reuse", action="store_true", help="a kept database: no load; kept")
    args = parser.parse_args()
    if not 0 < args.sends <= 2_000_000:
        raise SystemExit("--sends: 1 .. 2,000,000")
    os.environ["DATABASE_URL"] = harness.scratch_database_url(args.database)
    if not args.reuse:
        harness.server_statement(f'CREATE DATABASE "{args.database}"')
    harness.django_setup(own_redis_prefix=True)
    from django.db import connections

    try:
        if not args.reuse:
            harness.manage("migrate", "-v0", env={**os.environ})
            began = time.perf_counter()
            load(args.sends)
            print(f"loaded {args.sends:,} sends in {time.perf_counter() - began:.1f} s")
        report(measure(args.calls), args.calls)
    finally:
        connections.close_all()
        if not (args.keep or args.reuse):
            harness.database_drop(args.database)
            print(f"dropped database {args.database}")


if __name__ == "__main__":
    main()

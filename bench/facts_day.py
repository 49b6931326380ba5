"""Benchmark: writing one day's facts (decision 118) from a day of a million messages.

    DATABASE_URL=postgres://... python bench/facts_day.py [--messages 1000000] [--days 4] [--keep]

Makes its own database (`notifier_facts` on DATABASE_URL's server, migrated) and fills --days
consecutive UTC days (the measured day D is the third, so the days around it are there) with
--messages messages each, by INSERT .. SELECT over generate_series: 4 services (50/30/15/5%),
10 templates each, 20% campaign rows (20 campaigns per service), 1% of a test key, 0.5% created
ten days before they were sent (scheduled). Statuses: 88% delivered (of them 15% opened, 3%
clicked, 0.1% complained), 1% hard bounced, 1% soft then delivered, 0.4% unsubscribed, 1%
failed, 1% suppressed (half at the accept). Each first event has its EmailEvent and its mark,
opens a second event; an open lands up to 30 hours after its send, so a day has opens of the day
before. Secondary indexes are dropped for the load and built after it, as a restore would.

Then, each reported: the first write of D (`facts_write_day`), a rewrite of D (nothing changed),
the EXPLAIN (ANALYZE, BUFFERS) of D's counting SELECT, one service's day read from the rows
(`counted_sql`, what the API does for a day not written yet), and the cost of the new partial
index `msg_sent_at_idx` on the send path's SENT write (an UPDATE of 500 rows' status and sent_at,
with and without the index, on a copy of the table).
The database is dropped at the end unless --keep.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.harness import sql

DATABASE = "notifier_facts"
SHARES = (0.5, 0.3, 0.15, 0.05)
TEMPLATES = 10
CAMPAIGNS = 20
# Outcome by h = (g * 7919) % 1000.
OUTCOME = ("CASE WHEN {h} < 10 THEN 'FAILED' WHEN {h} < 20 THEN 'SUPPRESSED' WHEN {h} < 30 THEN 'BOUNCED' "
           "WHEN {h} < 31 THEN 'COMPLAINED' WHEN {h} < 61 THEN 'CLICKED' WHEN {h} < 181 THEN 'OPENED' "
           "ELSE 'DELIVERED' END")


def make_services() -> list[tuple[str, list[int], int]]:
    """(service id, its template versions, its first campaign id) x 4."""
    from campaigns.models import Campaign
    from clients.services import service_create
    from templates.services import template_create

    made = []
    for n in range(len(SHARES)):
        service, _key = service_create(name=f"facts-bench-{n}")
        versions = [template_create(client=service, name=f"t{t}", subject="s", html_body="<p>x</p>").id
                    for t in range(TEMPLATES)]
        campaigns = [Campaign.objects.create(name=f"c{c}", client=service, template_version_id=versions[0],
                                             status="COMPLETED").id for c in range(CAMPAIGNS)]
        made.append((service.pk, versions, campaigns[0]))
    return made


def load_day(day_start: datetime, messages: int, services: list[tuple[str, list[int], int]], g0: int) -> None:
    """One day's messages, then their events and marks (one statement each)."""
    low = 0
    for share, (service, versions, first_campaign) in zip(SHARES, services, strict=True):
        count = int(messages * share)
        versions_sql = "ARRAY[" + ",".join(map(str, versions)) + "]"
        sql(f"""
            INSERT INTO delivery_emailmessage (client_id, campaign_id, recipient, context,
              template_version_id, priority, status, provider, provider_message_id, attempts,
              idempotency_key, claim_token, error, created_at, claimed_at, cancel_key, sent_at, key_type,
              stream)
            SELECT %(service)s, CASE WHEN g %% 5 = 0 THEN %(campaign)s + g %% {CAMPAIGNS} END,
              'u' || g || '@example.com', '{{}}'::jsonb, ({versions_sql})[(g / 7) %% {TEMPLATES} + 1], 2,
              s.status, 'smtp', 'pm-' || g, 1, 'f:' || g, '', '',
              s.at - CASE WHEN g %% 200 = 0 THEN interval '10 days' ELSE interval '1 second' END,
              CASE WHEN s.status = 'SUPPRESSED' AND g %% 2 = 0 THEN NULL ELSE s.at END,
              '', CASE WHEN s.status NOT IN ('FAILED', 'SUPPRESSED') THEN s.at + interval '1 second' END,
              CASE WHEN g %% 100 = 0 THEN 'test' ELSE 'live' END,
              CASE WHEN g %% 5 = 0 THEN 'broadcast' ELSE 'transactional' END
            FROM generate_series(%(lo)s::bigint, %(hi)s) g,
              LATERAL (SELECT {OUTCOME.format(h='((g * 7919) %% 1000)')} AS status,
                       %(start)s::timestamptz + (g - %(lo)s) * interval '1 microsecond' * %(step)s AS at) s
        """, {"service": service, "campaign": first_campaign, "lo": g0 + low, "hi": g0 + low + count - 1,
              "start": day_start, "step": 86_400_000_000 // count})
        low += count
    lo, hi = g0, g0 + low - 1
    # Events: delivered (or a bounce) 5 s after the send, an open up to 30 h later (twice), a click a
    # minute after the open, a complaint, an unsubscribe.
    firsts = """
        SELECT m.id, x.kind, x.bounce, m.sent_at + x.after AS at FROM delivery_emailmessage m
        CROSS JOIN LATERAL (VALUES
          ('delivered', '', interval '5 seconds',
           m.status IN ('DELIVERED', 'OPENED', 'CLICKED', 'COMPLAINED')),
          ('bounced', 'hard', interval '5 seconds', m.status = 'BOUNCED'),
          ('bounced', 'soft', interval '3 seconds', (m.id * 13) %% 100 = 0 AND m.status = 'DELIVERED'),
          ('opened', '', interval '1 minute' * ((m.id * 37) %% 1800), m.status IN ('OPENED', 'CLICKED')),
          ('clicked', '', interval '1 minute' * ((m.id * 37) %% 1800 + 1), m.status = 'CLICKED'),
          ('complained', '', interval '1 hour', m.status = 'COMPLAINED'),
          ('unsubscribed', '', interval '2 hours', (m.id * 17) %% 250 = 0 AND m.status = 'DELIVERED')
        ) x(kind, bounce, after, happened)
        WHERE x.happened AND m.idempotency_key LIKE 'f:%%' AND m.id BETWEEN %(first)s AND %(last)s"""
    first, last = sql("SELECT min(id), max(id) FROM delivery_emailmessage WHERE idempotency_key = ANY(%s)",
                      [[f"f:{lo}", f"f:{hi}"]])[0]
    sql(f"""INSERT INTO feedback_emailevent (message_id, provider, provider_event_id, event_type, bounce_type,
              recipient, url, occurred_at, received_at, raw)
            SELECT f.id, 'smtp', f.kind || '-' || f.id, f.kind, f.bounce, '', '', f.at, f.at, '{{}}'::jsonb
            FROM ({firsts}) f
            UNION ALL  -- a second open of every opened message, an hour after the first
            SELECT f.id, 'smtp', 'again-' || f.id, 'opened', '', '', '', f.at + interval '1 hour',
                   f.at + interval '1 hour', '{{}}'::jsonb FROM ({firsts}) f WHERE f.kind = 'opened'
        """, {"first": first, "last": last})
    sql(f"""INSERT INTO feedback_messageeventmark (message_id, event_type, first_at)
            SELECT f.id, CASE WHEN f.bounce = 'soft' THEN 'soft_bounced' ELSE f.kind END, f.at
            FROM ({firsts}) f
        """, {"first": first, "last": last})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=4)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = harness.scratch_database_url(DATABASE)
    harness.server_statement(f'CREATE DATABASE "{DATABASE}"')
    harness.django_setup()
    from django.db import connections

    harness.manage("migrate", "-v0", env={**os.environ})
    from analytics.services.facts import counted_params, counted_sql, facts_write_day

    try:
        services = make_services()
        indexes = dict(sql("SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN "
                           "('delivery_emailmessage', 'feedback_emailevent', 'feedback_messageeventmark') "
                           "AND indexname NOT LIKE '%%pkey' AND indexdef NOT LIKE '%%UNIQUE%%'"))
        for name in indexes:
            sql(f"DROP INDEX {name}")
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        first_day = today - timedelta(days=args.days + 1)
        started = time.perf_counter()
        for n in range(args.days):
            load_day(first_day + timedelta(days=n), args.messages, services, g0=1 + n * args.messages)
            print(f"loaded day {n + 1} of {args.days} ({time.perf_counter() - started:.0f} s)", flush=True)
        for definition in indexes.values():
            sql(definition)
        sql("VACUUM ANALYZE delivery_emailmessage")
        sql("VACUUM ANALYZE feedback_emailevent")
        sql("VACUUM ANALYZE feedback_messageeventmark")
        counts = sql("SELECT (SELECT count(*) FROM delivery_emailmessage), (SELECT count(*) FROM "
                     "feedback_emailevent), (SELECT count(*) FROM feedback_messageeventmark)")[0]
        print(f"rows: {counts[0]:,} messages, {counts[1]:,} events, {counts[2]:,} marks; "
              f"load {time.perf_counter() - started:.0f} s; load average {harness.loadavg()}", flush=True)
        day = (first_day + timedelta(days=2)).date()
        for label in ("first write", "rewrite"):
            result = facts_write_day(day)
            print(f"{label} of {day}: {result.rows:,} fact rows, {result.deleted} deleted, "
                  f"{result.seconds:.2f} s", flush=True)
        totals = sql("SELECT sum(sent), sum(delivered), sum(opened), sum(failed), sum(suppressed) "
                     "FROM analytics_dayfact WHERE day = %s", [day])[0]
        print(f"  sent {totals[0]:,}, delivered {totals[1]:,}, opened {totals[2]:,}, failed {totals[3]:,}, "
              f"suppressed {totals[4]:,}")
        writable = "m.client_id IS NOT NULL AND NOT (m.client_id = ANY(%(excluded)s))"
        plan = sql("EXPLAIN (ANALYZE, BUFFERS) " + counted_sql(writable),
                   counted_params(day_from=day, day_to=day, excluded=[]))
        print("\n".join(row[0] for row in plan))
        service = services[0][0]
        one = "m.client_id = %(service)s AND m.key_type <> 'test'"
        reads = []
        for _ in range(3):
            began = time.perf_counter()
            sql(counted_sql(one), counted_params(day_from=day, day_to=day, service=service))
            reads.append(time.perf_counter() - began)
        print(f"one service's day from the rows (50% of the day): median {statistics.median(reads):.2f} s "
              f"of {[round(r, 2) for r in reads]}")
        sent_index_ab()
    finally:
        connections.close_all()
        if not args.keep:
            _drop()


def sent_index_ab(rows: int = 200_000, batch: int = 500, rounds: int = 40) -> None:
    """ms per SENT write of `batch` rows (status, sent_at, provider id: the send path's
    messages_mark_sent shape) on two copies of `rows` queued rows, one with msg_sent_at_idx."""
    for name in ("sent_without", "sent_with"):
        sql(f"DROP TABLE IF EXISTS {name}")
        sql(f"CREATE TABLE {name} (LIKE delivery_emailmessage INCLUDING DEFAULTS INCLUDING INDEXES)")
        sql(f"INSERT INTO {name} SELECT * FROM delivery_emailmessage ORDER BY id LIMIT %s", [rows])
        sql(f"UPDATE {name} SET status = 'SENDING', sent_at = NULL")
        sql(f"VACUUM ANALYZE {name}")
    sql("DROP INDEX IF EXISTS sent_with_sent_at_idx")
    on_sent_at = "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexdef LIKE '%%(sent_at)%%'"
    for index in sql(on_sent_at, ["sent_without"]):
        sql(f"DROP INDEX {index[0]}")
    if not sql(on_sent_at, ["sent_with"]):
        sql("CREATE INDEX ON sent_with (sent_at) WHERE sent_at IS NOT NULL")
    ids = [row[0] for row in sql("SELECT id FROM sent_without ORDER BY id")]
    timings: dict[str, list[float]] = {"sent_without": [], "sent_with": []}
    for r in range(rounds):
        chunk = ids[r * batch:(r + 1) * batch]
        for name in timings:
            began = time.perf_counter()
            sql(f"UPDATE {name} SET status = 'SENT', sent_at = now(), provider_message_id = 'x' || id "
                f"WHERE id = ANY(%s)", [chunk])
            timings[name].append((time.perf_counter() - began) * 1000)
    for name, values in timings.items():
        print(f"SENT write of {batch} rows, {name.replace('_', ' ')} the index: median "
              f"{statistics.median(values):.1f} ms, p90 {sorted(values)[int(len(values) * 0.9)]:.1f} ms")


def _drop() -> None:
    harness.database_drop(DATABASE)
    print(f"dropped database {DATABASE}")


if __name__ == "__main__":
    main()

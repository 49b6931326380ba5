"""Benchmark: the message log (GET /api/v1/messages) on a big message table.

    DATABASE_URL=postgres://... python bench/message_log.py [--rows 10000000] [--runs 200] [--keep]

Makes its own database (`notifier_log10m` on DATABASE_URL's server, migrated), fills the message
table by INSERT .. SELECT over generate_series (secondary indexes dropped for the load and built
after it, as a restore would) with --rows messages over 4 services (50/30/15/5%), 90 days, 20%
campaign rows (of contacts), the others one-off sends to 200,000 addresses per service, half of
them with metadata {order_id, user_id}; 10 templates per service from 40% down to 1%, statuses
from 60% SENT down to 0.1% COMPLAINED. Then:

1. the accept path's cost of the log's indexes: the batch send's one INSERT (500 one-off items,
   half with metadata, `messages_create_batch`) into this table with the index set before
   (migration 0016) and after (0017-0018), --batches each, milliseconds per batch;
2. each of the log's queries as the API runs it (`transactional.message_log.messages_log`, first
   page of 50 + 1, parameters drawn at random per run from the data), --runs times each on the
   biggest service: p50 / p99 / max in ms, and the EXPLAIN (ANALYZE, BUFFERS) of one run.

The database is dropped at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.harness import sql

DATABASE = "notifier_log10m"
SHARES = (0.5, 0.3, 0.15, 0.05)
TEMPLATES = 10
ADDRESSES = 200_000
CONTACTS = 100_000
DAYS = 90
CHUNK = 1_000_000
# Built after the load by the migrations' own definitions; 0017-0018's set is built later (A/B).
LOG_INDEXES = ("msg_client_created_idx", "msg_client_recipient_idx", "msg_metadata_idx",
               "msg_campaign_cover_idx")
# Template share by g % 100 (t0 40% ... t9 1%); status by g*31 % 1000.
TEMPLATE_CASE = ("CASE WHEN g%100<40 THEN 0 WHEN g%100<60 THEN 1 WHEN g%100<70 THEN 2 WHEN g%100<78 "
                 "THEN 3 WHEN g%100<85 THEN 4 WHEN g%100<90 THEN 5 WHEN g%100<94 THEN 6 WHEN g%100<97 "
                 "THEN 7 WHEN g%100<99 THEN 8 ELSE 9 END")
STATUS_CASE = ("CASE WHEN (g*31)%1000<600 THEN 'SENT' WHEN (g*31)%1000<850 THEN 'DELIVERED' "
               "WHEN (g*31)%1000<900 THEN 'OPENED' WHEN (g*31)%1000<920 THEN 'CLICKED' "
               "WHEN (g*31)%1000<940 THEN 'BOUNCED' WHEN (g*31)%1000<945 THEN 'FAILED' "
               "WHEN (g*31)%1000<955 THEN 'SUPPRESSED' WHEN (g*31)%1000<956 THEN 'COMPLAINED' "
               "WHEN (g*31)%1000<957 THEN 'QUEUED' ELSE 'SENT' END")

# As they appear in a statement that also has parameters (psycopg's `%` escaped).
TEMPLATE_SQL, STATUS_SQL = TEMPLATE_CASE.replace("%", "%%"), STATUS_CASE.replace("%", "%%")


def drop_database(url: str) -> None:
    from django.db import connections
    connections.close_all()
    harness.database_drop(DATABASE, url)
    print(f"dropped database {DATABASE}")


def make_services() -> list[dict]:
    """Four services, each with its templates and contacts: what the rows point at."""
    from clients.services import service_create
    from templates.services import template_create

    services = []
    for n in range(len(SHARES)):
        service, _key = service_create(name=f"log-bench-{n}")
        versions = [template_create(client=service, name=f"t{t}", subject="s", html_body="<p>x</p>").id
                    for t in range(TEMPLATES)]
        sql("INSERT INTO audience_contact (client_id, email, name, timezone, locale, attributes, subscribed, "
            "created_at, updated_at) SELECT %s, 'c' || g || '@example.com', '', '', '', '{}', true, now(), "
            "now() FROM generate_series(1, %s) g",
            [service.pk, CONTACTS])
        low, high = sql("SELECT min(id), max(id) FROM audience_contact WHERE client_id = %s", [service.pk])[0]
        services.append({"id": service.pk, "versions": versions, "contact_low": low, "contact_high": high,
                         "campaign_base": 1000 * (n + 1)})
    return services


def load_rows(service: dict, rows: int, start_g: int) -> None:
    """`rows` messages of one service, by chunks (each its own statement), g from start_g."""
    versions = "ARRAY[" + ",".join(str(v) for v in service["versions"]) + "]"
    step_us = DAYS * 86400 * 1_000_000 // rows
    for low in range(0, rows, CHUNK):
        high = min(rows, low + CHUNK)
        sql(f"""
            INSERT INTO delivery_emailmessage (client_id, campaign_id, contact_id, recipient, context,
              template_version_id, priority, status, provider, provider_message_id, attempts,
              idempotency_key, claim_token, error, created_at, cancel_key, sent_at, key_type, stream,
              metadata)
            SELECT %(svc)s,
              CASE WHEN g%%5=0 THEN %(cb)s + (g/50000)%%20 + 1 END,
              CASE WHEN g%%5=0 THEN %(cl)s + (g*7919)%%%(contacts)s END,
              CASE WHEN g%%5=0 THEN 'c' || ((g*7919)%%%(contacts)s + 1) || '@example.com'
                   WHEN g%%7=0 THEN 'User' || ((g*104729)%%%(addresses)s) || '@Example.com'
                   ELSE 'user' || ((g*104729)%%%(addresses)s) || '@example.com' END,
              '{{}}'::jsonb, ({versions})[{TEMPLATE_SQL} + 1], 2, {STATUS_SQL}, 'smtp', '', 1,
              'b:' || %(svc)s || ':' || g, '', '',
              now() - interval '{DAYS} days' + (g - %(g0)s) * %(step)s * interval '1 microsecond',
              '', now(), 'live', CASE WHEN g%%5=0 THEN 'broadcast' ELSE 'transactional' END,
              CASE WHEN g%%5<>0 AND g%%2=1 THEN jsonb_build_object('order_id', 'O-' || g,
                   'user_id', g%%100000) END
            FROM generate_series((%(g0)s + %(low)s)::bigint, %(g0)s + %(high)s - 1) g
        """.replace("%(svc)s", "%s").replace("%(cb)s", str(service["campaign_base"]))
            .replace("%(cl)s", str(service["contact_low"])).replace("%(contacts)s", str(CONTACTS))
            .replace("%(addresses)s", str(ADDRESSES)).replace("%(g0)s", str(start_g))
            .replace("%(step)s", str(step_us)).replace("%(low)s", str(low)).replace("%(high)s", str(high)),
            [service["id"], service["id"]])
        print(f"  {service['id']}: {high:,} / {rows:,} rows", flush=True)


def secondary_indexes() -> dict[str, str]:
    return dict(sql("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'delivery_emailmessage' "
                    "AND indexname NOT LIKE '%%pkey'"))


def build(definitions: dict[str, str]) -> None:
    for name, definition in definitions.items():
        started = time.perf_counter()
        sql(definition)
        print(f"  built {name} in {time.perf_counter() - started:.1f} s", flush=True)


SCRATCH = {"log_before": "the 0016 index set", "log_after": "the 0017-0018 index set"}


def scratch_tables(source_service: str, rows: int) -> None:
    """Two copies of `rows` of the message table (one service's), with the index set before the
    log's (msg_client_idx, msg_campaign_status_idx) and after it (its four indexes), as decision
    58's A/B does."""
    for name in SCRATCH:
        sql(f"DROP TABLE IF EXISTS {name}")
        sql(f"CREATE TABLE {name} (LIKE delivery_emailmessage INCLUDING DEFAULTS INCLUDING IDENTITY "
            "INCLUDING CONSTRAINTS INCLUDING INDEXES)")
        sql(f"INSERT INTO {name} SELECT * FROM delivery_emailmessage WHERE client_id = %s LIMIT %s",
            [source_service, rows])
    for index, _ in sql("SELECT indexname, 1 FROM pg_indexes WHERE tablename = 'log_before'"):
        columns = sql("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [index])[0][0]
        if "lower((recipient)" in columns or "jsonb_path_ops" in columns or "created_at DESC" in columns:
            sql(f"DROP INDEX {index}")
    sql("CREATE INDEX ON log_before (client_id) WHERE client_id IS NOT NULL")
    sql("CREATE INDEX ON log_before (campaign_id, status)")
    for name in SCRATCH:
        sql(f"VACUUM ANALYZE {name}")


def accept_ab(service: dict, batches: int) -> dict[str, list[float]]:
    """ms per batch of 500 one-off items (half with metadata) through the batch send's one
    INSERT, into each scratch table in turn, batch by batch, so both see the same load."""
    from clients.models import Service
    from core.priorities import Priority
    from templates.models import TemplateVersion
    from transactional import batch

    real_statement = batch._insert_statement
    batch._publish_after_commit = lambda *args: None  # rows only: no broker in this benchmark
    client = Service.objects.get(pk=service["id"])
    version = TemplateVersion.objects.get(pk=service["versions"][0])
    timings: dict[str, list[float]] = {name: [] for name in SCRATCH}
    try:
        for b in range(batches):
            for name in SCRATCH:
                statement, defaults = real_statement(False)
                # Aliased as the real table: the statement's RETURNING names its columns by it.
                into = statement.replace("INSERT INTO delivery_emailmessage ",
                                         f"INSERT INTO {name} AS delivery_emailmessage ", 1)
                batch._insert_statement = lambda broadcast, into=into, defaults=defaults: (into, defaults)
                items = [batch.BatchItem(
                    recipient=f"new{b}-{i}@example.com", template_version=version, context={"code": "1"},
                    priority=Priority.NORMAL, metadata={"order_id": f"N-{b}-{i}"} if i % 2 else None)
                    for i in range(500)]
                started = time.perf_counter()
                batch.messages_create_batch(client=client, items=items)
                timings[name].append((time.perf_counter() - started) * 1000)
    finally:
        batch._insert_statement = real_statement
    return timings


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def cases(service: dict, rows: int, rng: random.Random) -> dict[str, Callable[[], dict]]:
    """Each query of the log: a function drawing its filters (LogFilters fields) per run."""
    from django.utils import timezone

    n = rows
    now = timezone.now()

    def some_g(one_off: bool = True) -> int:
        g = rng.randrange(1, n)
        return g + (1 if g % 5 == 0 else 0) if one_off else g - g % 5 + 5

    def address() -> str:
        return f"user{(some_g() * 104729) % ADDRESSES}@EXAMPLE.com"

    def contact_address() -> str:
        return f"c{rng.randrange(1, CONTACTS)}@example.com"

    def day() -> dict:
        start = now - timedelta(days=rng.uniform(2, DAYS - 2))
        return {"created_after": start, "created_before": start + timedelta(days=1)}

    def order() -> dict:
        g = some_g()
        return {"metadata": {"order_id": f"O-{g | 1}"}}

    tid = service["template_ids"]
    return {
        "newest (no filter)": lambda: {},
        "page at a random cursor": lambda: {"_cursor_days": rng.uniform(0, DAYS)},
        "recipient (one-off address)": lambda: {"recipient": address()},
        "recipient (a contact's address)": lambda: {"recipient": contact_address()},
        "status=DELIVERED (25%)": lambda: {"status": "DELIVERED"},
        "status=BOUNCED (2%)": lambda: {"status": "BOUNCED"},
        "status=FAILED (0.5%)": lambda: {"status": "FAILED"},
        "status=COMPLAINED (0.1%)": lambda: {"status": "COMPLAINED"},
        "template t0 (40%)": lambda: {"template_id": tid[0]},
        "template t9 (1%)": lambda: {"template_id": tid[9]},
        "campaign": lambda: {"campaign_id": service["campaign_base"] + rng.randrange(1, 21)},
        "stream=broadcast (20%)": lambda: {"stream": "broadcast"},
        "one day (created range)": day,
        "metadata order_id (1 row)": order,
        "metadata user_id (~20 rows)": lambda: {"metadata": {"user_id": str(rng.randrange(100000))}},
        "recipient + status=DELIVERED": lambda: {"recipient": address(), "status": "DELIVERED"},
        "metadata user_id + status": lambda: {"metadata": {"user_id": str(rng.randrange(100000))},
                                             "status": "SENT"},
        "template t9 + one day": lambda: {"template_id": tid[9], **day()},
        "status=FAILED + one day": lambda: {"status": "FAILED", **day()},
        "status=COMPLAINED + template t9": lambda: {"status": "COMPLAINED", "template_id": tid[9]},
    }


def run_queries(service: dict, rows: int, runs: int, explain: bool) -> list[tuple[str, float, float, float]]:
    from django.utils import timezone

    from transactional.message_log import LogCursor, LogFilters, log_querysets, messages_log

    rng = random.Random(29)
    results = []
    for name, draw in cases(service, rows, rng).items():
        timings: list[float] = []
        server: list[float] = []
        queries = []
        for _ in range(runs):
            drawn = draw()
            cursor_days = drawn.pop("_cursor_days", None)
            after = (LogCursor(timezone.now() - timedelta(days=cursor_days), 2**62)
                     if cursor_days is not None else None)
            started = time.perf_counter()
            messages_log(service_id=service["id"], key_type="live", filters=LogFilters(**drawn),
                         after=after, limit=51)
            timings.append((time.perf_counter() - started) * 1000)
            # The server's own time for the same queries (no client, no wait for a CPU to run
            # the client on): what the plans cost, apart from the machine's load.
            queries = log_querysets(service_id=service["id"], key_type="live",
                                    filters=LogFilters(**drawn), after=after, limit=51)
            plans = [json.loads(query.explain(format="json", analyze=True, timing=False, summary=True))[0]
                     for query in queries]
            server.append(sum(plan["Execution Time"] + plan["Planning Time"] for plan in plans))
        figures = (statistics.median(timings), percentile(timings, 0.99), max(timings))
        results.append((name, *figures))
        print(f"{name:34} wall p50 {figures[0]:7.2f} p99 {figures[1]:7.2f} max {figures[2]:7.2f} ms | "
              f"server p50 {statistics.median(server):7.2f} p99 {percentile(server, 0.99):7.2f} "
              f"max {max(server):7.2f} ms", flush=True)
        for query in queries if explain else []:
            print("    " + query.explain(analyze=True, buffers=True).replace("\n", "\n    "))
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--batches", type=int, default=30, help="accept-path batches per index set")
    parser.add_argument("--copy-rows", type=int, default=1_000_000, help="rows in each accept-path copy")
    parser.add_argument("--accept-only", action="store_true", help="with --reuse: the accept A/B only")
    parser.add_argument("--keep", action="store_true", help="keep the database (and reuse it with --reuse)")
    parser.add_argument("--reuse", action="store_true", help="a database a --keep run left: queries only")
    parser.add_argument("--no-explain", action="store_true")
    args = parser.parse_args()
    url = harness.scratch_database_url(DATABASE)
    os.environ["DATABASE_URL"] = url
    try:
        harness.django_setup()
        if not args.reuse:
            setup(args)
        elif args.accept_only:
            accept_report(accept_service(), args)
            return
        service = biggest_service(args.rows)
        print(f"\nqueries on {service['id']} ({service['rows']:,} of {args.rows:,} rows), "
              f"{args.runs} runs each, load average {os.getloadavg()[0]:.1f}")
        run_queries(service, service["rows"], args.runs, explain=not args.no_explain)
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
    finally:
        if not args.keep:
            drop_database(url)


def setup(args: argparse.Namespace) -> None:
    drop_database(os.environ["DATABASE_URL"])
    harness.server_statement(f'CREATE DATABASE "{DATABASE}"', os.environ["DATABASE_URL"])
    harness.manage("migrate", "--no-input", env=dict(os.environ))
    services = make_services()
    log_set = {name: definition for name, definition in secondary_indexes().items() if name in LOG_INDEXES}
    sql("ALTER TABLE delivery_emailmessage DROP CONSTRAINT msg_idempotency_key_uniq")
    for name in secondary_indexes():
        sql(f"DROP INDEX {name}")
    started = time.perf_counter()
    g0 = 1
    for service, share in zip(services, SHARES, strict=True):
        rows = int(args.rows * share)
        load_rows(service, rows, g0)
        g0 += rows
    print(f"loaded {args.rows:,} rows in {time.perf_counter() - started:.0f} s", flush=True)
    sql("SET maintenance_work_mem = '1GB'")
    before = dict(harness_before_set())
    build(before)
    build(log_set)
    sql("DROP INDEX msg_client_idx")
    sql("DROP INDEX msg_campaign_status_idx")  # widened into msg_campaign_log_idx (0018)
    sql("VACUUM ANALYZE delivery_emailmessage")
    accept_report(services[1], args)


def accept_report(service: dict, args: argparse.Namespace) -> None:
    started = time.perf_counter()
    scratch_tables(service["id"], args.copy_rows)
    print(f"scratch copies of {args.copy_rows:,} rows built in {time.perf_counter() - started:.0f} s",
          flush=True)
    timings = accept_ab(service, args.batches)
    for name, label in SCRATCH.items():
        print(f"accept path, batch of 500 one-off items (half with metadata) into {name} ({label}), "
              f"{args.batches} batches alternated: median {statistics.median(timings[name]):.1f} ms, "
              f"p90 {percentile(timings[name], 0.9):.1f} ms, load average {os.getloadavg()[0]:.1f}",
              flush=True)
    for name in SCRATCH:
        sql(f"DROP TABLE {name}")


def harness_before_set() -> list[tuple[str, str]]:
    """The 0016 index set: every secondary index the models had before the log's, rebuilt."""
    return [
        ("msg_idempotency_key_uniq", "ALTER TABLE delivery_emailmessage ADD CONSTRAINT "
                                     "msg_idempotency_key_uniq UNIQUE (idempotency_key)"),
        ("msg_status_claimed_idx", "CREATE INDEX msg_status_claimed_idx ON delivery_emailmessage "
                                   "(status, claimed_at)"),
        ("msg_campaign_status_idx", "CREATE INDEX msg_campaign_status_idx ON delivery_emailmessage "
                                    "(campaign_id, status)"),
        ("msg_recipient_idx", "CREATE INDEX msg_recipient_idx ON delivery_emailmessage (recipient) "
                              "WHERE contact_id IS NULL"),
        ("msg_provider_msgid_idx", "CREATE INDEX msg_provider_msgid_idx ON delivery_emailmessage "
                                   "(provider_message_id) WHERE provider_message_id <> ''"),
        ("msg_client_cancel_key_idx", "CREATE INDEX msg_client_cancel_key_idx ON delivery_emailmessage "
                                      "(client_id, cancel_key) WHERE cancel_key <> ''"),
        ("msg_client_scheduled_idx", "CREATE INDEX msg_client_scheduled_idx ON delivery_emailmessage "
                                     "(client_id, scheduled_for) WHERE status = 'SCHEDULED' AND "
                                     "campaign_id IS NULL"),
        ("msg_client_idx", "CREATE INDEX msg_client_idx ON delivery_emailmessage (client_id) "
                           "WHERE client_id IS NOT NULL"),
        ("msg_contact_idx", "CREATE INDEX msg_contact_idx ON delivery_emailmessage (contact_id) "
                            "WHERE contact_id IS NOT NULL"),
    ]


def accept_service() -> dict:
    svc = sql("SELECT id FROM clients_service WHERE name = 'log-bench-1'")[0][0]
    versions = [row[0] for row in sql(
        "SELECT v.id FROM templates_templateversion v JOIN templates_template t ON t.id = v.template_id "
        "WHERE t.client_id = %s ORDER BY t.name", [svc])]
    return {"id": svc, "versions": versions}


def biggest_service(total: int) -> dict:
    from templates.models import Template
    svc = sql("SELECT id FROM clients_service WHERE name = 'log-bench-0'")[0][0]
    template_ids = dict(Template.objects.filter(client_id=svc).values_list("name", "pk"))
    contact_low = sql("SELECT min(id) FROM audience_contact WHERE client_id = %s", [svc])[0][0]
    return {"id": svc, "rows": int(total * SHARES[0]), "campaign_base": 1000,
            "template_ids": [template_ids[f"t{t}"] for t in range(TEMPLATES)], "contact_low": contact_low}


if __name__ == "__main__":
    main()

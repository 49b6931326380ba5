"""Growth in numbers (issue 30): what a month of history costs the live path.

    bench/production_server.sh start var/pg-production 5441   # docs/operations.md's settings
    DATABASE_URL=postgres://postgres@127.0.0.1:5441/postgres REDIS_URL=redis://127.0.0.1:6379/13 \
        .venv/bin/python bench/history_growth.py --messages 30000000 --events-per-message 3 [--keep | --reuse]

Any server will do; the issue's figures come from one configured as a production install is
(decision 131: 6 GB of shared buffers, autovacuum, WAL sized and compressed), not from the
defaults a test server starts with.

Two scratch databases on DATABASE_URL's server, migrated alike (4 services, their templates and
contacts, the campaign's list): `notifier_growth_empty` and `notifier_growth_history`, which also
holds --days of history: --messages messages (bench/history_rows.py: ids carry their UTC day,
COPYed into the parent tables, indexes and constraints built after the load as a restore would),
their attempts, ~--events-per-message ESP events each and their marks, the daily facts. Days
older than --personal-days (7, the default retention) are written as personal-data removal leaves
them (no address, context or ESP payload; the keyed hash kept): a month of history as a running
install holds it. The storage step's "before" wants every row whole: --personal-days >= --days.

Then, in the same sitting, --rounds rounds, each on both databases in turn (the order swapped
every round), each with its own notifier processes (the Procfile's web, worker-p0, worker-p0b,
worker-p3, worker-ops) against Postfix's smtp-sink:
1. P0 accept: POST /api/v1/messages (priority critical) at --rate requests/s, Poisson arrivals,
   for --p0-seconds; latency from each request's due time (an open loop);
2. the campaign rate to smtp-sink: a P3 campaign to --campaign-recipients contacts, sent/s
   between 5% and 95% of the audience (bench/campaign_send.py's figure);
3. GET /api/v1/campaigns/{id}/stats, --stats-requests times, on the campaign just sent and (history)
   on a month-old-to-yesterday history campaign; and the dashboard's data (`dashboard_data`) with
   Django's caches off, --dashboard-runs times: the database time of each refresh and its slowest
   query, over all runs, for the first (the throughput's kept minutes forgotten before it: it
   counts the whole hour, decision 135) and over the repeated ones (they count the open minutes).
Then on the history database only:
4. bytes per message (table + indexes; summed over partitions when partitioned) before and after
   personal-data removal (`personal_data_expire`, as of the day every history row is past its
   personal retention), after a VACUUM, and after a VACUUM FULL (what a rewrite would keep);
5. expiring the oldest day while P0 accepts run at --rate: on the partitioned layout the
   partition holding it dropped as the hourly upkeep does (`history_expire` as of the day it is
   past its metadata retention: `expire_data` without its personal-data step), on the
   unpartitioned one a DELETE of the day's rows (what exists: the "before" figure); its database
   time (each statement timed; pg_stat_statements too when the server preloads it), the P0 p99
   before / during it, and every backend seen waiting on a lock meanwhile.

Prints a table (empty vs history, target, pass/fail), the layout it ran on, the load average, and
writes bench/results/history_growth/result.json. Each step is bounded in time; the databases are
dropped at the end unless --keep (a kept history is measured again with --reuse).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness

DATABASES = {"empty": "notifier_growth_empty", "history": "notifier_growth_history"}
STATE_DIR = harness.LOG_DIR / "history_growth"
RESULT = "RESULT "
STACK = ("worker-p0", "worker-p0b", "worker-p3", "worker-ops")
# Freshly started processes are slow for their first requests (imports, pools forking, caches):
# every load starts with this long at half the rate, unmeasured.
WARM_SECONDS = 10.0


# --- the parent: databases, rounds, report --------------------------------------------------------


def main() -> None:
    args = parse_args()
    if args.role:
        ROLES[args.role](args)
        return
    if not os.environ.get("DATABASE_URL") or not os.environ.get("REDIS_URL"):
        raise SystemExit("set DATABASE_URL (its server gets the scratch databases) and REDIS_URL")
    began, load_before = time.monotonic(), harness.loadavg()
    results: dict = {"args": vars(args), "started": datetime.now(UTC).isoformat(timespec="seconds"),
                     "loadavg_start": load_before, "rounds": {"empty": [], "history": []}}
    settings = server_settings_apply(args.server_settings)
    results["server_settings"] = settings
    try:
        for label in DATABASES:
            results[f"setup_{label}"] = setup_database(label, args)
        for number in range(args.rounds):
            order = list(DATABASES) if number % 2 == 0 else list(reversed(DATABASES))
            for label in order:
                results["rounds"][label].append(child("round", label, args, "--round", str(number)))
        if not args.skip_storage:
            results["storage"] = child("storage", "history", args)
        if not args.skip_expiry:
            results["expiry"] = child("expiry", "history", args)
    finally:
        server_settings_reset(settings)
        forget_redis_keys()
        if not args.keep:
            for name in DATABASES.values():
                harness.database_drop(name)
            print(f"dropped {', '.join(DATABASES.values())}")
    results["seconds"] = round(time.monotonic() - began)
    results["loadavg_end"] = harness.loadavg()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    (STATE_DIR / "result.json").write_text(json.dumps(results, indent=1, default=str))
    report(results)


def server_settings_apply(spec: str) -> dict[str, str]:
    """`name=value,...` set server-wide for this run (both databases alike); {name: value}."""
    settings = dict(item.split("=", 1) for item in spec.split(",") if item)
    for name, value in settings.items():
        harness.server_statement(f"ALTER SYSTEM SET {name} = '{value}'")
    if settings:
        harness.server_statement("SELECT pg_reload_conf()")
        print(f"server settings for this run: {settings}", flush=True)
    return settings


def server_settings_reset(settings: dict[str, str]) -> None:
    for name in settings:
        harness.server_statement(f"ALTER SYSTEM RESET {name}")
    if settings:
        harness.server_statement("SELECT pg_reload_conf()")


def forget_redis_keys() -> None:
    """The keys this run's processes wrote (rate limits, caches, leases: under its prefixes)."""
    import redis

    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    for label in DATABASES:
        keys = list(client.scan_iter(match=f"growth-{label}-{os.getpid()}:*", count=5000))
        for start in range(0, len(keys), 5000):
            client.delete(*keys[start:start + 5000])


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=30_000_000, help="messages of history")
    parser.add_argument("--events-per-message", type=float, default=3.0,
                        help="ESP events per sent message, on average (1 .. 2k-1 each)")
    parser.add_argument("--days", type=int, default=30, help="days of history, the last one yesterday")
    parser.add_argument("--personal-days", type=int, default=7,
                        help="the history's last days that still hold personal data (the default "
                             "retention); older days are written as its removal leaves them")
    parser.add_argument("--campaign-share", type=float, default=0.5, help="share of the history in campaigns")
    parser.add_argument("--load-workers", type=int, default=2, help="days loaded at once")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=100.0, help="P0 requests/s offered (Poisson)")
    parser.add_argument("--p0-seconds", type=float, default=30.0)
    parser.add_argument("--connections", type=int, default=32, help="P0 client connections")
    parser.add_argument("--campaign-recipients", type=int, default=100_000)
    parser.add_argument("--campaign-timeout", type=float, default=600.0)
    parser.add_argument("--stats-requests", type=int, default=30)
    parser.add_argument("--dashboard-runs", type=int, default=20)
    parser.add_argument("--scrub-seconds", type=float, default=4 * 3600.0,
                        help="bound of the personal-data removal (bytes after are then partial)")
    parser.add_argument("--no-vacuum-full", action="store_true")
    parser.add_argument("--no-prewarm", action="store_true",
                        help="measure each round with the current week's indexes as the buffers hold "
                             "them (cold after a restart) instead of read into them first")
    parser.add_argument("--expiry-seconds", type=float, default=40.0, help="P0 load around the expiry")
    parser.add_argument("--expiry-at", type=float, default=15.0, help="the expiry starts this far into it")
    parser.add_argument("--server-settings", default="",
                        help="PostgreSQL settings for the run, e.g. docs/operations.md's "
                             "'max_wal_size=16GB,checkpoint_timeout=15min,wal_compression=lz4' "
                             "(ALTER SYSTEM and a reload; reset at the end)")
    parser.add_argument("--skip-storage", action="store_true")
    parser.add_argument("--skip-expiry", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep both databases")
    parser.add_argument("--reuse", action="store_true", help="databases a --keep run left: measure only")
    parser.add_argument("--child-timeout", type=float, default=12 * 3600.0)
    parser.add_argument("--role", choices=sorted(ROLES), help=argparse.SUPPRESS)
    parser.add_argument("--database", choices=sorted(DATABASES), help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--as-of", default="", help=argparse.SUPPRESS)
    parser.add_argument("--day", type=int, default=0, help=argparse.SUPPRESS)
    return parser.parse_args()


def setup_database(label: str, args: argparse.Namespace) -> dict:
    state = STATE_DIR / f"{label}.json"
    if args.reuse and state.exists():
        print(f"{label}: reusing {DATABASES[label]}")
        return json.loads(state.read_text())
    name = DATABASES[label]
    harness.database_drop(name)
    harness.server_statement(f'CREATE DATABASE "{name}"')
    return child("setup", label, args)


def child(role: str, label: str, args: argparse.Namespace, *extra: str) -> dict:
    """This script in a process of its own on `label`'s database (its own Django, connection
    and Redis prefix); its output streamed, its RESULT line returned."""
    env = {**os.environ, "DATABASE_URL": harness.scratch_database_url(DATABASES[label]),
           "NOTIFIER_REDIS_PREFIX": f"growth-{label}-{os.getpid()}", "PYTHONUNBUFFERED": "1"}
    argv = [harness.PY, str(Path(__file__).resolve()), "--role", role, "--database", label,
            *forwarded(args), *extra]
    print(f"--- {role} on {label} (load average {harness.loadavg()})", flush=True)
    process = subprocess.Popen(argv, env=env, cwd=harness.ROOT, stdout=subprocess.PIPE, text=True)
    deadline = threading.Timer(args.child_timeout, process.kill)
    deadline.start()
    found = None
    try:
        for line in process.stdout:
            if line.startswith(RESULT):
                found = json.loads(line[len(RESULT):])
                print(f"  result: {line[len(RESULT):][:1500]}", flush=True)
            else:
                print(f"  {line}", end="", flush=True)
    finally:
        deadline.cancel()
        process.wait()
    if process.returncode or found is None:
        raise SystemExit(f"{role} on {label} failed (exit {process.returncode})")
    return found


def forwarded(args: argparse.Namespace) -> list[str]:
    names = ("messages", "events_per_message", "days", "personal_days", "load_workers", "campaign_share",
             "rate", "p0_seconds", "connections", "campaign_recipients", "campaign_timeout", "stats_requests",
             "dashboard_runs", "scrub_seconds", "expiry_seconds", "expiry_at")
    flags = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in names]
    return (flags + (["--no-vacuum-full"] if args.no_vacuum_full else [])
            + (["--no-prewarm"] if args.no_prewarm else []))


def emit(result: dict) -> None:
    print(RESULT + json.dumps(result, default=str), flush=True)


# --- setup ------------------------------------------------------------------------------------------


def role_setup(args: argparse.Namespace) -> None:
    harness.django_setup()
    harness.manage("migrate", "-v0", env=dict(os.environ))
    from bench import history_rows as rows
    from campaigns.management.commands.send_demo_campaign import _demo_list, _demo_template
    from clients.services import service_create
    from templates.services import template_create

    per_day = args.messages // args.days
    contacts = [max(1, n) for n in rows.campaign_rows(per_day, args.campaign_share)]
    services, key = [], ""
    for index, count in enumerate(contacts):
        service, service_key = service_create(name=f"growth-{index}", rate_limit="1000000/min")
        key = key or service_key
        versions = [template_create(client=service, name=f"t{t}", subject="Your order {{ code }}",
                                    html_body="<p>Hello {{ name }}, order {{ code }}.</p>").id
                    for t in range(rows.TEMPLATES)]
        services.append(rows.ServiceRows(service.pk, versions, rows.contacts_insert(service.pk, index, count),
                                         count, {}))
    owner = services[0].service_id
    from clients.models import Service

    first = Service.objects.get(pk=owner)
    template_create(client=first, name="bench-otp", subject="Code {{ code }}", html_body="<p>{{ code }}</p>")
    state = {"database": DATABASES[args.database], "key": key, "service": owner,
             "campaign_template": _demo_template(first),
             "campaign_list": _demo_list(first, args.campaign_recipients).pk, "days": [],
             "history_campaign": None}
    if args.database == "history":
        state.update(load_history(args, services))
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    (STATE_DIR / f"{args.database}.json").write_text(json.dumps(state, indent=1))
    emit(state)


def load_history(args: argparse.Namespace, services: list) -> dict:
    from django.db import connection

    from bench import history_rows as rows
    from delivery.models import EmailMessage

    today = rows.day_number(datetime.now(UTC).date())
    days = list(range(today - args.days, today))
    per_day = args.messages // args.days
    created = rows.ensure_history_partitions([*days, today])
    layout = "partitioned" if rows.is_partitioned(rows.MESSAGES) else "unpartitioned"
    print(f"layout: {layout}; partitions created for the history: {len(created)}", flush=True)
    for index, (service, count) in enumerate(zip(services, rows.campaign_rows(per_day, args.campaign_share),
                                                 strict=True)):
        rows.campaigns_create(service, index, days, count)
    deferred = [rows.defer_table(table) for table in rows.TABLES]
    began = time.perf_counter()
    totals = rows.copy_days(days, per_day, args.campaign_share, services, args.events_per_message,
                            workers=args.load_workers, scrubbed_before=today - args.personal_days)
    load_seconds = time.perf_counter() - began
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
    began = time.perf_counter()
    built = {}
    for item in deferred:
        built.update(rows.restore_table(item))
    build_seconds = time.perf_counter() - began
    print(f"indexes and constraints built in {build_seconds:.0f} s; slowest: "
          f"{sorted(built.items(), key=lambda kv: -kv[1])[:3]}", flush=True)
    began = time.perf_counter()
    with connection.cursor() as cursor:
        for table in rows.TABLES:
            cursor.execute(f"VACUUM (ANALYZE) {table}")
    vacuum_seconds = time.perf_counter() - began
    facts_seconds = write_facts(days)
    counts_seconds = write_campaign_counts()
    fresh = table_sizes()  # before any round adds (and updates, with autovacuum off here) rows
    biggest = (EmailMessage.objects.filter(campaign_id=services[0].campaigns[days[-1]]).count())
    print(f"history loaded: {dict(totals)}; COPY {load_seconds:.0f} s, indexes {build_seconds:.0f} s, "
          f"VACUUM {vacuum_seconds:.0f} s, facts {facts_seconds:.0f} s, "
          f"campaign counters and tallies {counts_seconds:.0f} s", flush=True)
    return {"days": days, "layout": layout, "rows": dict(totals), "copy_seconds": round(load_seconds),
            "index_seconds": round(build_seconds), "vacuum_seconds": round(vacuum_seconds),
            "facts_seconds": round(facts_seconds), "campaign_counts_seconds": round(counts_seconds),
            "slowest_builds": sorted(built.items(), key=lambda kv: -kv[1])[:5],
            "history_campaign": services[0].campaigns[days[-1]], "history_campaign_rows": biggest,
            "fresh_sizes": fresh, "fresh_per_message": per_message(fresh)}


def write_facts(days: list[int]) -> float:
    """The daily facts of each history day, as the scheduler writes them each night."""
    from analytics.services.facts import facts_write_day
    from bench import history_rows as rows

    began = time.perf_counter()
    for day in days:
        facts_write_day(rows.day_of_number(day))
    return time.perf_counter() - began


def write_campaign_counts() -> float:
    """Each history campaign's event counters and minute tally, as the webhook batches would
    have kept them (COPY wrote the events and marks past them): `recount_campaign`'s rebuild."""
    from campaigns.models import Campaign
    from feedback.services.counters import campaign_counters_recount

    began = time.perf_counter()
    for campaign_id in Campaign.objects.order_by("pk").values_list("pk", flat=True):
        campaign_counters_recount(campaign_id=campaign_id)
    return time.perf_counter() - began


# --- the notifier processes ---------------------------------------------------------------------


class Stack:
    """The Procfile's web and `workers` against an smtp-sink, on this database."""

    def __init__(self, workers: tuple[str, ...], label: str) -> None:
        from bench.esps import SmtpSink
        from testkit.ports import free_port

        self.logs = harness.log_dir(STATE_DIR / f"logs-{label}")
        self.sink = SmtpSink(free_port(), self.logs)
        self.port = free_port()
        self.workers = workers
        self.procs: list = []

    def __enter__(self) -> Stack:
        from testkit.processes import procfile_process

        self.sink.start()
        env = harness.process_env(NOTIFIER_PROVIDERS="smtp", SMTP_HOST="127.0.0.1",
                                  SMTP_PORT=str(self.sink.port), PYTHONUNBUFFERED="1")
        self.procs = [harness.web(env, self.logs, self.port)] + [
            procfile_process(name, env, self.logs) for name in self.workers]
        for process in self.procs:
            process.start()
        harness.wait_http(f"http://127.0.0.1:{self.port}/healthz", timeout=90)
        for process in self.procs[1:]:
            process.wait_for_log("ready.", timeout=90)
        return self

    def __exit__(self, *exc: object) -> None:
        for process in self.procs:
            process.stop(timeout=15)
        self.sink.stop()
        shutil.rmtree(self.sink.dump_dir, ignore_errors=True)
        with contextlib.suppress(Exception):  # leftovers of this stack must not reach the next
            from notifier.celery import app
            app.control.purge()


# --- P0 accept, Poisson arrivals ----------------------------------------------------------------


def poisson_offsets(rate: float, seconds: float, rng: random.Random) -> list[float]:
    """Arrival times in [0, seconds) of a Poisson process of `rate` per second."""
    offsets, at = [], 0.0
    while True:
        at += rng.expovariate(rate)
        if at >= seconds:
            return offsets
        offsets.append(at)


def offered_load(port: int, key: str, offsets: list[float], connections: int,
                 tag: str) -> list[tuple[float, float, int]]:
    """Request i is due at t0 + offsets[i] and sent then by the next free connection; its latency
    counts from that due time (no coordinated omission). [(offset, latency ms, HTTP status or 0)]."""
    results: list = [None] * len(offsets)
    turn = itertools.count()
    t0 = time.perf_counter() + 0.2
    headers = {"Authorization": f"Api-Key {key}", "Content-Type": "application/json"}

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while (i := next(turn)) < len(offsets):
            due = t0 + offsets[i]
            time.sleep(max(0.0, due - time.perf_counter()))
            body = json.dumps({"to": f"otp-{tag}-{i}@example.com", "template": "bench-otp",
                               "priority": "critical", "context": {"code": f"{i % 1000000:06d}"}})
            try:
                conn.request("POST", "/api/v1/messages", body, headers)
                response = conn.getresponse()
                response.read()
                status = response.status
            except (http.client.HTTPException, OSError):
                conn.close()
                status = 0
            results[i] = (offsets[i], (time.perf_counter() - due) * 1000, status)
        conn.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def latency_figures(results: list[tuple[float, float, int]]) -> dict:
    latencies = [ms for _, ms, _ in results]
    if not latencies:
        return {"requests": 0}
    return {"requests": len(latencies), "errors": sum(status != 202 for _, _, status in results),
            "p50_ms": harness.percentile(latencies, 0.5), "p99_ms": harness.percentile(latencies, 0.99),
            "max_ms": max(latencies)}


def wal_lsn() -> str:
    return harness.sql("SELECT pg_current_wal_lsn()::text")[0][0]


def wal_since(lsn: str) -> int:
    return int(harness.sql("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)", [lsn])[0][0])


def blocks() -> tuple[int, int]:
    """This database's (blocks read from outside shared buffers, blocks found in them) so far."""
    read, hit = harness.sql("SELECT blks_read, blks_hit FROM pg_stat_database "
                            "WHERE datname = current_database()")[0]
    return int(read), int(hit)


def blocks_since(before: tuple[int, int], per: int) -> dict[str, float]:
    """Blocks read (the page cache or the disk) and found, per request or message, since `before`
    (approximate: a busy backend flushes its counters every second, an idle one within 10 s)."""
    read, hit = blocks()
    return {"blocks_read_per": (read - before[0]) / max(1, per),
            "blocks_hit_per": (hit - before[1]) / max(1, per)}


def p0_phase(stack: Stack, state: dict, args: argparse.Namespace, seed: int) -> dict:
    rng = random.Random(seed)
    warm = poisson_offsets(args.rate / 2, WARM_SECONDS, rng)
    offered_load(stack.port, state["key"], warm, args.connections, "warm")
    drain_critical(60)
    # Both databases share the server: a checkpoint of the previous round's writes (a 100,000-
    # message campaign's WAL) falls into a 60 s window by chance, and its writes slow every
    # backend. Checkpointed and settled first, each window starts alike; the history's own
    # costs (bigger indexes, more full-page images after the checkpoint) stay in it.
    harness.sql("CHECKPOINT")
    settled = harness.settle()
    lsn, blocks_before = wal_lsn(), blocks()
    results = offered_load(stack.port, state["key"], poisson_offsets(args.rate, args.p0_seconds, rng),
                           args.connections, f"r{seed}")
    figures = latency_figures(results)
    figures["wal_bytes_per_request"] = wal_since(lsn) / max(1, figures["requests"])
    figures["loadavg"] = harness.loadavg()
    figures["settled"] = settled
    drain_critical(60)
    figures.update(blocks_since(blocks_before, figures["requests"]))
    return figures


def drain_critical(seconds: float) -> None:
    """Until no P0 message waits (at most `seconds`): the next phase starts on an idle stack."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not harness.sql("SELECT 1 FROM delivery_emailmessage WHERE priority = 0 AND status IN "
                           "('QUEUED', 'SENDING') AND campaign_id IS NULL LIMIT 1"):
            return
        time.sleep(0.5)


# --- the campaign, the stats, the dashboard -------------------------------------------------------


def campaign_phase(state: dict, args: argparse.Namespace) -> dict:
    from campaigns.models import Campaign
    from campaigns.selectors import campaign_counters
    from campaigns.services.launch import campaign_launch

    n = args.campaign_recipients
    lsn, blocks_before = wal_lsn(), blocks()
    began = time.perf_counter()
    definition = {"template_id": state["campaign_template"], "priority": "low",
                  "recipients": {"type": "list", "list_id": state["campaign_list"]}}
    campaign = campaign_launch(definition=definition, client_id=state["service"])
    samples: list[tuple[float, int]] = []
    while time.perf_counter() - began < args.campaign_timeout:
        campaign.refresh_from_db()
        samples.append((time.perf_counter() - began, campaign_counters(campaign=campaign)["sent"]))
        if campaign.status not in (Campaign.Status.SENDING, Campaign.Status.QUEUED):
            break
        time.sleep(0.5)
    low = next((t, s) for t, s in samples if s >= 0.05 * n)
    high = next(((t, s) for t, s in samples if s >= 0.95 * n), samples[-1])
    rate = (high[1] - low[1]) / max(high[0] - low[0], 1e-6)
    return {"campaign": campaign.pk, "status": campaign.status, "sent": samples[-1][1],
            "rate_per_s": rate, "end_to_end_s": samples[-1][0],
            "wal_bytes_per_message": wal_since(lsn) / max(1, samples[-1][1]), "loadavg": harness.loadavg(),
            **blocks_since(blocks_before, samples[-1][1])}


def stats_phase(stack: Stack, state: dict, campaign_id: int, requests_count: int) -> dict:
    import requests

    session = requests.Session()
    session.headers["Authorization"] = f"Api-Key {state['key']}"
    url = f"http://127.0.0.1:{stack.port}/api/v1/campaigns/{campaign_id}/stats"
    latencies = []
    for _ in range(requests_count):
        began = time.perf_counter()
        response = session.get(url, timeout=30)
        latencies.append((time.perf_counter() - began) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"stats of {campaign_id}: HTTP {response.status_code} {response.text[:200]}")
    # An ended campaign's first request counts its rows and keeps the counts, the next ones read
    # them (decision 141): the first is given apart, as the request that meets counts come due.
    repeated = latencies[1:] or latencies
    return {"campaign": campaign_id, "requests": len(latencies), "p50_ms": harness.percentile(latencies, 0.5),
            "p99_ms": harness.percentile(latencies, 0.99), "max_ms": max(latencies),
            "first_ms": latencies[0], "repeated_p99_ms": harness.percentile(repeated, 0.99)}


def queries_probe(call, runs: int, *, first=None) -> dict:
    """`call()` `runs` times with Django's caches off: the wall time and the database time of each
    call (its queries' own times, as Django's debug cursor records them), and the slowest query
    by its place in the call (the same call runs the same queries). `first()`, if given, runs
    ahead of the first call (untimed); the first call's figures and the repeated calls' p99 are
    given apart too (a repeated call may read what the first kept)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext, override_settings

    walls, totals, by_place = [], [], {}
    if first is not None:
        first()
    with override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}):
        for _ in range(runs):
            with CaptureQueriesContext(connection) as captured:
                began = time.perf_counter()
                call()
                walls.append((time.perf_counter() - began) * 1000)
            times = [float(query["time"]) * 1000 for query in captured.captured_queries]
            totals.append(sum(times))
            for place, query in enumerate(captured.captured_queries):
                by_place.setdefault(place, [query["sql"][:160], []])[1].append(times[place])
    slowest = max(by_place.values(), key=lambda item: harness.percentile(item[1], 0.99))
    repeated = totals[1:] or totals
    return {"runs": runs, "queries": len(by_place), "wall_p50_ms": harness.percentile(walls, 0.5),
            "wall_p99_ms": harness.percentile(walls, 0.99), "db_p50_ms": harness.percentile(totals, 0.5),
            "db_p99_ms": harness.percentile(totals, 0.99),
            "slowest_query_p99_ms": harness.percentile(slowest[1], 0.99), "slowest_query": slowest[0],
            "first_wall_ms": walls[0], "first_db_ms": totals[0],
            "first_slowest_query_ms": max(times[0] for _, times in by_place.values()),
            "repeated_db_p99_ms": harness.percentile(repeated, 0.99),
            "repeated_slowest_query_p99_ms": max(
                harness.percentile(times[1:] or times, 0.99) for _, times in by_place.values())}


def role_round(args: argparse.Namespace) -> None:
    harness.django_setup()
    from analytics.dashboard.selectors import dashboard_data
    from analytics.models import EndedCampaignCounts
    from analytics.selectors.campaign_stats import campaign_stats
    from analytics.selectors.overview import live_minutes_forget
    from analytics.services.ended_campaigns import ended_campaign_row_counts
    from campaigns.models import Campaign

    state = json.loads((STATE_DIR / f"{args.database}.json").read_text())
    result: dict = {"database": args.database, "round": args.round, "loadavg_start": harness.loadavg()}
    if not args.no_prewarm:
        result["prewarmed_mb"] = prewarm_current_indexes()
    with Stack(STACK, args.database) as stack:
        result["p0"] = p0_phase(stack, state, args, seed=args.round)
        result["campaign"] = campaign_phase(state, args)
        count = args.stats_requests
        result["stats_new"] = stats_phase(stack, state, result["campaign"]["campaign"], count)
        if state["history_campaign"]:
            # Counted in this round's first request (a round of an hour ago would have kept them).
            EndedCampaignCounts.objects.filter(campaign_id=state["history_campaign"]).delete()
            result["stats_history"] = stats_phase(stack, state, state["history_campaign"], count)
            old = Campaign.objects.get(pk=state["history_campaign"])
            # Its rows counted (as when its kept counts are due), then as the API reads them.
            result["stats_history_queries"] = queries_probe(lambda: campaign_stats(campaign=old), 5)
            result["stats_history_kept_queries"] = queries_probe(
                lambda: campaign_stats(campaign=old, rows=ended_campaign_row_counts(campaign=old)), 5)
        new = Campaign.objects.get(pk=result["campaign"]["campaign"])
        result["stats_new_queries"] = queries_probe(lambda: campaign_stats(campaign=new), 5)
        # As a running install refreshes it: the beat has kept the settled minutes and counted the
        # ended campaigns (both run every minute; these are their tasks), the workers counted the
        # open minutes live (decisions 138 and 140).
        result["dashboard"] = queries_probe(dashboard_data, args.dashboard_runs, first=beat_minute)
        # After Redis lost its keys: every figure counted in the database once (then kept).
        result["dashboard_cold"] = queries_probe(dashboard_data, 1, first=live_minutes_forget)
    result["loadavg_end"] = harness.loadavg()
    emit(result)


def beat_minute() -> None:
    """What the beat's every-minute tasks do for the dashboard: its kept minutes and the counts of
    its ended campaigns."""
    from analytics.selectors.overview import live_minutes_keep
    from analytics.services.ended_campaigns import ended_campaign_counts_refresh

    live_minutes_keep()
    ended_campaign_counts_refresh()


def prewarm_current_indexes() -> float:
    """Reads the indexes of the partitions today's rows go to into shared buffers (pg_prewarm);
    their megabytes. A server that has been running holds them there: every accept and send
    writes to them, the random-key ones (the recipient's) anywhere. The rounds follow a restart
    (pg_stat_statements is preloaded), which leaves them on disk, and a round's first accepts
    read them one page each (0.9 block reads per accept in the 12-06 rounds): a cold start,
    not the cost of the history. Both databases alike; nothing on an unpartitioned layout."""
    from django.db import connection

    from bench import history_rows as rows
    from core.partitions.catalog import partitions_of
    from core.partitions.spec import day_floor, day_number

    today = day_floor(day_number(datetime.now(UTC)))
    blocks = 0
    with connection.cursor() as cursor:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        for table in rows.TABLES:
            for part in partitions_of(cursor, table):
                if (part.lower is None or part.lower <= today) and today < part.upper:
                    cursor.execute("SELECT coalesce(sum(pg_prewarm(indexrelid)), 0) FROM pg_index "
                                   "WHERE indrelid = to_regclass(%s)", [part.name])
                    blocks += int(cursor.fetchone()[0])
    return round(blocks * 8192 / 2**20, 1)


# --- storage: bytes per message, personal-data removal ------------------------------------------


def table_sizes() -> dict[str, dict[str, int]]:
    """Per table: its bytes (heap with TOAST, indexes; summed over the leaf partitions when it is
    partitioned) and rows."""
    from bench import history_rows as rows

    sizes = {}
    for table in rows.TABLES:
        # pg_partition_tree lists nothing for a table that is not partitioned.
        leaves = ("SELECT relid FROM pg_partition_tree(%s) WHERE isleaf" if rows.is_partitioned(table)
                  else "SELECT %s::regclass AS relid")
        heap, indexes = harness.sql(
            f"SELECT sum(pg_table_size(relid)), sum(pg_indexes_size(relid)) FROM ({leaves}) t", [table])[0]
        count = harness.sql(f"SELECT count(*) FROM {table}")[0][0]
        sizes[table] = {"heap": int(heap), "indexes": int(indexes), "rows": count}
    return sizes


def per_message(sizes: dict[str, dict[str, int]]) -> dict[str, float]:
    messages = max(1, sizes["delivery_emailmessage"]["rows"])
    table = sizes["delivery_emailmessage"]
    return {"message_table": (table["heap"] + table["indexes"]) / messages,
            "message_heap": table["heap"] / messages, "message_indexes": table["indexes"] / messages,
            "all_four_tables": sum(s["heap"] + s["indexes"] for s in sizes.values()) / messages,
            "bytes_total": sum(s["heap"] + s["indexes"] for s in sizes.values())}


def vacuum(full: bool) -> float:
    from bench import history_rows as rows

    began = time.perf_counter()
    for table in rows.TABLES:
        harness.sql(f"VACUUM ({'FULL, ' if full else ''}ANALYZE) {table}")
    return time.perf_counter() - began


def role_storage(args: argparse.Namespace) -> None:
    harness.django_setup()
    from django.conf import settings

    from clients.personal_data import personal_data_expire

    state = json.loads((STATE_DIR / "history.json").read_text())
    result: dict = {"live_rows_deleted": forget_live_rows(state["days"])}
    result["vacuum_before_seconds"] = vacuum(full=False)
    result["before"] = table_sizes()
    as_of = datetime.now(UTC) + timedelta(days=settings.NOTIFIER_RETENTION_PERSONAL_DAYS + 1)
    print(f"removing personal data as of {as_of:%Y-%m-%d %H:%M} (bounded by {args.scrub_seconds:.0f} s)",
          flush=True)
    began = time.perf_counter()
    done = personal_data_expire(as_of=as_of, budget_seconds=args.scrub_seconds)
    seconds = time.perf_counter() - began
    result["scrub"] = {"done": done, "seconds": round(seconds, 1),
                       "messages_per_s": done.get("messages", 0) / max(seconds, 1e-6),
                       "left": harness.sql("SELECT count(*) FROM delivery_emailmessage WHERE "
                                           "personal_data_removed_at IS NULL AND recipient <> ''")[0][0]}
    print(f"personal data removed: {done} in {seconds:.0f} s", flush=True)
    result["after_scrub"] = table_sizes()
    result["vacuum_seconds"] = vacuum(full=False)
    result["after_vacuum"] = table_sizes()
    if not args.no_vacuum_full:
        result["vacuum_full_seconds"] = vacuum(full=True)
        result["after_vacuum_full"] = table_sizes()
    for name in ("before", "after_scrub", "after_vacuum", "after_vacuum_full"):
        if name in result:
            result[f"{name}_per_message"] = per_message(result[name])
    emit(result)


def forget_live_rows(days: list[int]) -> int:
    """Delete the rows the rounds wrote (ids outside the history's days), and what hangs off them,
    so that the bytes per message are the history's: the rounds' campaign rows have no events and
    were updated with autovacuum off on this server (dead versions)."""
    from bench import history_rows as rows

    low, high = rows.day_bounds(days[0])[0], rows.day_bounds(days[-1])[1]
    outside = "NOT (message_id >= %s AND message_id < %s)"
    for table in ("feedback_messageeventmark", "feedback_emailevent", "delivery_deliveryattempt",
                  "delivery_deadletter", "delivery_ambiguityrecord"):
        harness.sql(f"DELETE FROM {table} WHERE {outside}", [low, high])
    deleted = harness.sql("WITH gone AS (DELETE FROM delivery_emailmessage WHERE NOT (id >= %s AND id < %s) "
                          "RETURNING 1) SELECT count(*) FROM gone", [low, high])[0][0]
    print(f"deleted the rounds' {deleted:,} messages (and their rows) before measuring bytes", flush=True)
    return deleted


# --- expiring a day -------------------------------------------------------------------------------


EXPIRY_APPLICATION = "history-growth-expiry"  # the expiry's connection, set through libpq's PGAPPNAME


class LockWaits:
    """Every 20 ms, the backends of this database waiting on a lock, the expiry's own apart:
    `DETACH .. CONCURRENTLY` waits by design for the transactions that began before it (their
    virtualxid locks); what must never wait is any other backend (a send)."""

    def __init__(self) -> None:
        self.samples = 0
        self.waiting_samples = 0
        self.expiry_waiting_samples = 0
        self.max_waiting = 0
        self.seen: Counter = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LockWaits:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        from django.db import connection

        try:
            while not self._stop.wait(0.02):
                rows = harness.sql(
                    "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 90), wait_event, "
                    "application_name = %s FROM pg_stat_activity "
                    "WHERE datname = current_database() AND wait_event_type = 'Lock'", [EXPIRY_APPLICATION])
                others = [row for row in rows if not row[2]]
                self.samples += 1
                self.waiting_samples += bool(others)
                self.expiry_waiting_samples += len(others) < len(rows)
                self.max_waiting = max(self.max_waiting, len(others))
                self.seen.update(f"{'expiry: ' * own}{query} [{event}]" for query, event, own in rows)
        finally:
            connection.close()

    def figures(self) -> dict:
        return {"samples": self.samples, "samples_with_waiters": self.waiting_samples,
                "samples_with_the_expiry_waiting": self.expiry_waiting_samples,
                "max_waiting": self.max_waiting, "waiting": self.seen.most_common(5)}


def role_expiry(args: argparse.Namespace) -> None:
    harness.django_setup()
    from bench import history_rows as rows
    from core.partitions.spec import span_days, span_start

    state = json.loads((STATE_DIR / "history.json").read_text())
    layout = "partitioned" if rows.is_partitioned(rows.MESSAGES) else "unpartitioned"
    # The unit of expiry: a day unpartitioned, the partition holding the oldest day partitioned
    # (a week: its days of history, up to 7).
    first = state["days"][0]
    day = first
    if layout == "partitioned":
        day = min(span_start(first) + span_days(), state["days"][-1] + 1) - 1
    low, high = rows.day_bounds(first)[0], rows.day_bounds(day)[1]
    in_day = harness.sql("SELECT count(*) FROM delivery_emailmessage WHERE id >= %s AND id < %s",
                         [low, high])[0][0]
    print(f"expiring {rows.day_of_number(first)} .. {rows.day_of_number(day)} ({in_day:,} messages) "
          f"on the {layout} layout", flush=True)
    result: dict = {"layout": layout, "day": str(rows.day_of_number(first)),
                    "last_day": str(rows.day_of_number(day)), "messages": in_day}
    rng = random.Random(99)
    with Stack(("worker-p0", "worker-p0b"), "expiry") as stack, Expirer(args, day) as expirer:
        offered_load(stack.port, state["key"], poisson_offsets(args.rate / 2, WARM_SECONDS, rng),
                     args.connections, "warm")
        drain_critical(60)
        load: dict = {}
        offsets = poisson_offsets(args.rate, args.expiry_seconds, rng)
        began = time.perf_counter() + 0.2  # offered_load's own t0
        loader = threading.Thread(target=lambda: load.update(
            results=offered_load(stack.port, state["key"], offsets, args.connections, "expiry")), daemon=True)
        with LockWaits() as waits:
            loader.start()
            time.sleep(max(0.0, began + args.expiry_at - time.perf_counter()))
            start = time.perf_counter() - began
            result["expire"] = expirer.go()
            end = start + result["expire"]["wall_s"]
            loader.join(args.expiry_seconds + 60)
        result["lock_waits"] = waits.figures()
    results = [r for r in load.get("results", []) if r]
    result["expiry_window_s"] = [round(start, 2), round(end, 2)]
    result["p0_before"] = latency_figures([r for r in results if r[0] < start])
    result["p0_during"] = latency_figures([r for r in results if start <= r[0] <= end + 1.0])
    result["p0_all"] = latency_figures(results)
    result["messages_left_in_day"] = harness.sql(
        "SELECT count(*) FROM delivery_emailmessage WHERE id >= %s AND id < %s", [low, high])[0][0]
    result["loadavg"] = harness.loadavg()
    emit(result)


class Expirer:
    """The expiry in a process of its own (`--role expire`), started and set up (Django imported,
    connected) before the load, so that neither its start nor the load's threads here are in the
    time it measures; `go()` runs it and returns its RESULT."""

    def __init__(self, args: argparse.Namespace, day: int) -> None:
        argv = [harness.PY, str(Path(__file__).resolve()), "--role", "expire", "--database", "history",
                f"--day={day}"]
        env = {**os.environ, "PGAPPNAME": EXPIRY_APPLICATION}
        self.process = subprocess.Popen(argv, env=env, cwd=harness.ROOT, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.timeout = args.child_timeout

    def __enter__(self) -> Expirer:
        line = self.process.stdout.readline()
        if line.strip() != "READY":
            raise RuntimeError(f"expire did not start: {line!r}")
        return self

    def go(self) -> dict:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        output, _ = self.process.communicate(timeout=self.timeout)
        lines = [line for line in output.splitlines() if line.startswith(RESULT)]
        if self.process.returncode or not lines:
            raise RuntimeError(f"expire failed: {output[-2000:]}")
        return json.loads(lines[-1][len(RESULT):])

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class StatementTimes:
    """A Django execute wrapper: each statement's time (the database's, on this socket) by verb."""

    def __init__(self) -> None:
        self.by_verb: Counter = Counter()
        self.slowest: list[tuple[float, str]] = []

    def __call__(self, execute, sql, params, many, context):
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            ms = (time.perf_counter() - began) * 1000
            self.by_verb[sql.split(None, 1)[0].upper()] += ms
            self.slowest = sorted([*self.slowest, (ms, sql[:120])], reverse=True)[:5]


def role_expire(args: argparse.Namespace) -> None:
    harness.django_setup()
    from django.db import connection

    from bench import history_rows as rows
    from clients.history_expiry import history_expire

    times = StatementTimes()
    layout = "partitioned" if rows.is_partitioned(rows.MESSAGES) else "unpartitioned"
    before = pg_stat_statements()
    as_of = expiry_as_of(args.day)
    print("READY", flush=True)
    sys.stdin.readline()
    began = time.perf_counter()
    with connection.execute_wrapper(times):
        if layout == "partitioned":
            # What the hourly `delivery.partitions_upkeep` does (and `expire_data` after its
            # personal-data step, which as of a day 90 days on would first strip every row
            # still holding personal data: another measurement, the storage step's).
            dropped = history_expire(as_of)
            what = (f"history_expire({as_of.isoformat(timespec='seconds')}): "
                    f"{', '.join(d.partition for d in dropped) or 'nothing'} dropped")
            db_s = sum(times.by_verb.values()) / 1000  # autocommit: each statement's commit is in it
        else:
            db_s = delete_day(args.day)
            what = "DELETE of the day's marks, events, attempts, dead letters and messages, one transaction"
    wall = time.perf_counter() - began
    emit({"what": what, "wall_s": wall, "db_s": db_s, "statements_s": sum(times.by_verb.values()) / 1000,
          "db_ms_by_verb": dict(times.by_verb), "slowest": times.slowest,
          "pg_stat_statements": pg_stat_statements_delta(before)})


def expiry_as_of(day: int):
    """The moment the whole of `day` is past every service's metadata retention."""
    from bench import history_rows as rows
    from clients.models import Service
    from clients.retention import retention_defaults, retention_effective

    kept = [retention_defaults().metadata_days] + [
        stream.metadata_days for stored in Service.objects.values_list("retention", flat=True)
        for stream in retention_effective(stored).values()]
    end = datetime(*rows.day_of_number(day + 1).timetuple()[:3], tzinfo=UTC)
    return end + timedelta(days=max(kept), minutes=1)


def delete_day(day: int) -> float:
    """The unpartitioned layout's expiry of a day, set-based: what hangs off its messages, then
    the messages (the ids carry the day). Seconds from BEGIN to COMMIT included (all of it is the
    database's: five statements on a local socket)."""
    from django.db import connection, transaction

    from bench import history_rows as rows

    low, high = rows.day_bounds(day)
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        for table in ("feedback_messageeventmark", "feedback_emailevent", "delivery_deliveryattempt",
                      "delivery_deadletter"):
            cursor.execute(f"DELETE FROM {table} WHERE message_id >= %s AND message_id < %s", [low, high])
        cursor.execute("DELETE FROM delivery_emailmessage WHERE id >= %s AND id < %s", [low, high])
    return time.perf_counter() - began


def pg_stat_statements() -> dict | None:
    """This database's statements' total time, if the server preloads pg_stat_statements."""
    if "pg_stat_statements" not in harness.sql("SHOW shared_preload_libraries")[0][0]:
        return None
    harness.sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    rows = harness.sql("SELECT queryid, left(query, 100), total_exec_time FROM pg_stat_statements s "
                       "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database()")
    return {queryid: (query, total) for queryid, query, total in rows}


def pg_stat_statements_delta(before: dict | None) -> list | None:
    after = pg_stat_statements()
    if before is None or after is None:
        return None
    delta = [(round(total - before.get(queryid, ("", 0.0))[1], 1), query)
             for queryid, (query, total) in after.items()]
    return sorted(delta, reverse=True)[:8]


# --- the report ---------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


DASHBOARD_FIGURES = (
    ("dashboard refresh, database time p99 (Django caches off)", ("dashboard", "db_p99_ms")),
    ("dashboard, slowest query p99", ("dashboard", "slowest_query_p99_ms")),
    # The first call after the beat's keep, then the repeated refreshes (decisions 135, 138).
    ("dashboard, first call: database time", ("dashboard", "first_db_ms")),
    ("dashboard, first call: its slowest query", ("dashboard", "first_slowest_query_ms")),
    ("dashboard, repeated refreshes: database time p99", ("dashboard", "repeated_db_p99_ms")),
    ("dashboard, repeated refreshes: slowest query p99", ("dashboard", "repeated_slowest_query_p99_ms")),
    # One call with no kept minute and no live count (Redis lost its keys): the live series' whole
    # windows counted in the database.
    ("dashboard after a Redis loss: database time", ("dashboard_cold", "first_db_ms")),
    ("dashboard after a Redis loss: its slowest query", ("dashboard_cold", "first_slowest_query_ms")),
)


def report(results: dict) -> None:
    rounds, args = results["rounds"], results["args"]
    setup = results["setup_history"]

    def figure(label: str, *path: str) -> list[float]:
        values = []
        for run in rounds[label]:
            value = run
            for step in path:
                value = value.get(step, {}) if isinstance(value, dict) else {}
            if isinstance(value, (int, float)):
                values.append(float(value))
        return values

    def both(*path: str) -> tuple[float, float, str]:
        empty, history = figure("empty", *path), figure("history", *path)
        spread = f"runs {[round(v, 1) for v in empty]} / {[round(v, 1) for v in history]}"
        return median(empty), median(history), spread

    lines = [("Figure", "Empty", "History", "Target", "Verdict")]
    p0e, p0h, p0s = both("p0", "p99_ms")
    lines.append((f"P0 accept p99, {args['rate']:g}/s Poisson, {args['p0_seconds']:g} s ({p0s})",
                  f"{p0e:.1f} ms", f"{p0h:.1f} ms", "history <= 1.10 x empty", verdict(p0h <= 1.1 * p0e)))
    p50e, p50h, _ = both("p0", "p50_ms")
    lines.append(("P0 accept p50", f"{p50e:.1f} ms", f"{p50h:.1f} ms", "", ""))
    re, rh, rs = both("campaign", "rate_per_s")
    lines.append((f"campaign rate to smtp-sink, {args['campaign_recipients']:,} recipients ({rs})",
                  f"{re:,.0f}/s", f"{rh:,.0f}/s", "history >= 0.90 x empty", verdict(rh >= 0.9 * re)))
    for name, path in (*DASHBOARD_FIGURES, ("stats p99, the campaign just sent", ("stats_new", "p99_ms"))):
        e, h, s = both(*path)
        lines.append((f"{name} ({s})", f"{e:.1f} ms", f"{h:.1f} ms", "< 200 ms", verdict(max(e, h) < 200)))
    rows_label = f"history campaign of {setup.get('history_campaign_rows', 0):,} rows"
    h = median(figure("history", "stats_history", "p99_ms"))
    lines.append((f"stats p99, {rows_label}", "-", f"{h:.1f} ms", "< 200 ms", verdict(h < 200)))
    firsts = figure("history", "stats_history", "first_ms")
    if firsts:
        lines.append((f"stats, {rows_label}: its first request, counting its rows (runs "
                      f"{[round(v, 1) for v in firsts]}) / p99 of the next ones, reading the kept counts",
                      "-", f"{median(firsts):.1f} / "
                           f"{median(figure('history', 'stats_history', 'repeated_p99_ms')):.1f} ms", "", ""))
    expiry = results.get("expiry")
    if expiry:
        expire = expiry["expire"]
        lines.append((f"expiry of {expiry['day']} ({expiry['messages']:,} messages), database time "
                      f"[{expiry['layout']}: {expire['what']}]", "-", f"{expire['db_s']:.2f} s", "< 1 s",
                      verdict(expire["db_s"] < 1.0)))
        waits = expiry["lock_waits"]
        sampled = f"{waits['samples']} samples of 20 ms"
        lines.append((f"other backends waiting on a lock during it ({sampled})", "-",
                      f"{waits['samples_with_waiters']} samples, max {waits['max_waiting']}", "0",
                      verdict(waits["samples_with_waiters"] == 0)))
        lines.append(("the expiry itself waiting (DETACH CONCURRENTLY on older transactions)", "-",
                      f"{waits.get('samples_with_the_expiry_waiting', '-')} samples", "", ""))
        lines.append(("P0 p99 before / during the expiry (due within it + 1 s)", "-",
                      f"{expiry['p0_before'].get('p99_ms', 0):.1f} / "
                      f"{expiry['p0_during'].get('p99_ms', 0):.1f} ms "
                      f"({expiry['p0_during'].get('requests', 0)} requests)", "", ""))
    storage = results.get("storage") or {}
    stages = [("as loaded", setup.get("fresh_per_message"))] + [
        (label, storage.get(f"{name}_per_message")) for name, label in (
            ("after_vacuum", "personal data removed, VACUUMed in place"),
            ("after_vacuum_full", "personal data removed, rewritten (VACUUM FULL)"))]
    for label, per in stages:
        if per:
            lines.append((f"bytes per history message, {label}: message table (heap + indexes) / "
                          "with its attempts, events, marks", "-",
                          f"{per['message_table']:,.0f} / {per['all_four_tables']:,.0f}", "stated", ""))
    we, wh, _ = both("p0", "wal_bytes_per_request")
    lines.append(("WAL bytes per P0 request (cluster-wide)", f"{we:,.0f}", f"{wh:,.0f}", "", ""))
    we, wh, _ = both("campaign", "wal_bytes_per_message")
    lines.append(("WAL bytes per campaign message (cluster-wide)", f"{we:,.0f}", f"{wh:,.0f}", "", ""))
    for phase, per in (("p0", "P0 request"), ("campaign", "campaign message")):
        read_e, read_h, _ = both(phase, "blocks_read_per")
        hit_e, hit_h, _ = both(phase, "blocks_hit_per")
        lines.append((f"blocks per {per}: read outside shared buffers / found in them (the database's)",
                      f"{read_e:,.1f} / {hit_e:,.1f}", f"{read_h:,.1f} / {hit_h:,.1f}", "", ""))
    print()
    print(f"layout: {setup.get('layout')}; history {setup.get('rows')} over {args['days']} days; "
          f"COPY {setup.get('copy_seconds')} s, indexes {setup.get('index_seconds')} s, "
          f"facts {setup.get('facts_seconds')} s")
    if storage:
        print(f"personal-data removal: {storage['scrub']}")
    for row in lines:
        print(" | ".join(str(cell) for cell in row))
    last = rounds["history"][-1] if rounds["history"] else {}
    if last:
        print(f"slowest dashboard query (history, last round): {last['dashboard']['slowest_query']}")
        print(f"after a Redis loss: {last['dashboard_cold']['slowest_query']}")
    if last.get("stats_history_queries"):
        probe = last["stats_history_queries"]
        print(f"history campaign stats in-process: db p99 {probe['db_p99_ms']:.1f} ms, slowest query "
              f"{probe['slowest_query_p99_ms']:.1f} ms: {probe['slowest_query']}")
    if last.get("stats_history_kept_queries"):
        probe = last["stats_history_kept_queries"]
        print(f"the same from its kept counts: db p99 {probe['db_p99_ms']:.1f} ms, wall p99 "
              f"{probe['wall_p99_ms']:.1f} ms, slowest query {probe['slowest_query_p99_ms']:.1f} ms: "
              f"{probe['slowest_query']}")
    print(f"server settings for the run: {results.get('server_settings') or 'the server as it was'}")
    print(f"load average: start {results['loadavg_start']}, end {results['loadavg_end']}; "
          f"{results['seconds']} s in all")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


ROLES = {"setup": role_setup, "round": role_round, "storage": role_storage, "expiry": role_expiry,
         "expire": role_expire}


if __name__ == "__main__":
    main()

"""Benchmark: an existing install moved into day partitions while it sends (issue 30, decision 123).

    DATABASE_URL=postgres://postgres@/postgres?host=<socket dir> REDIS_URL=redis://... \\
        python bench/partition_move.py [--messages 1000000] [--days 30] [--rate 20] [--keep]

1. Makes its own database (`notifier_partmove` on DATABASE_URL's server): migrated, a service
   with its key and OTP template, then taken back to the release before the partitions (delivery
   0022, feedback 0006: plain tables, identity ids) and filled by INSERT .. SELECT over
   generate_series with --messages SENT messages spread over the --days days before today (ids
   growing with time), one accepted attempt each, a `delivered` ESP event and its mark for every
   other one; analyzed. Migrated forward: the tables are over the migration's limit and stay
   unpartitioned, as a big install's do.
2. Starts the system on 127.0.0.1: smtp-sink, the web server, a critical pool and the scheduler.
   P0 OTPs are accepted through POST /api/v1/messages at --rate per second (open loop, 4
   threads) for --settle seconds, then during `manage.py partition_tables -v 2`, then --settle
   seconds more.
3. Prints: the move's time (per table), rows per second, each swap's lock (waited / held), the
   accept p50 / p99 / max before, during and after, every accept that was not a 202, and lost /
   duplicate messages (every accepted message SENT, once, at smtp-sink); the old rows' checksums
   before and after (equal: the content is identical). Writes bench/results/partition_move.json.

The database is dropped at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.esps import SmtpSink
from testkit.ports import free_port

DATABASE = "notifier_partmove"
BEFORE = (("delivery", "0022_personal_data_indexes"), ("feedback", "0006_owner_is_the_service"))
TABLES = ("delivery_emailmessage", "delivery_deliveryattempt", "feedback_emailevent",
          "feedback_messageeventmark")
CHUNK = 200_000
DRIVER_THREADS = 4
WARM_UP_SECONDS = 5.0


def build(messages: int, days: int) -> str:
    """The scratch database as a big install is after this release's migrations; the API key."""
    key = harness.otp_api_key("bench-partition-move", "--rate", "1000000/min")
    for app, migration in BEFORE:
        harness.manage("migrate", app, migration, "--noinput")
    harness.django_setup()
    ((version, client),) = harness.sql(
        "SELECT v.id, t.client_id FROM templates_templateversion v JOIN templates_template t "
        "ON t.id = v.template_id WHERE t.name = 'bench-otp' LIMIT 1")
    started = time.monotonic()
    for low in range(1, messages + 1, CHUNK):
        _fill(low, min(low + CHUNK - 1, messages), messages, days, version, client)
        done = min(low + CHUNK - 1, messages)
        print(f"  {done:,} messages ({time.monotonic() - started:.0f} s)", flush=True)
    for table in TABLES:
        harness.sql(f"VACUUM ANALYZE {table}")
    print(f"loaded in {time.monotonic() - started:.0f} s", flush=True)
    from django.db import connections
    connections.close_all()
    migrated = harness.manage("migrate", "--noinput").stdout
    print("\n".join(line.strip() for line in migrated.splitlines() if "unpartitioned" in line))
    return key


def _fill(low: int, high: int, total: int, days: int, version: int, client: str) -> None:
    """Messages low..high of `total`, evenly over the `days` days before today, with a few
    seconds of jitter (a row's time is taken before its id); their attempts, events and marks."""
    span = days * 86400
    ((last,),) = harness.sql("SELECT coalesce(max(id), 0) FROM delivery_emailmessage")
    harness.sql(
        "INSERT INTO delivery_emailmessage (recipient, context, template_version_id, priority, status, "
        "provider, provider_message_id, attempts, idempotency_key, claim_token, error, created_at, "
        "sent_at, cancel_key, client_id, key_type, stream) "
        "SELECT 'user' || g || '@example.com', jsonb_build_object('code', g::text), %s, 0, 'SENT', 'smtp', "
        "'', 1, 'old:' || g, '', '', t, t + interval '1 second', '', %s, 'live', 'transactional' "
        "FROM generate_series(%s, %s) g, LATERAL (SELECT date_trunc('day', now()) - %s * interval '1 second' "
        "+ (g::float8 * %s / %s + g %% 5) * interval '1 second' AS t) x ORDER BY g",
        [version, client, low, high, span, span, total])
    ids = harness.sql("SELECT min(id), max(id) FROM delivery_emailmessage WHERE id > %s", [last])[0]
    harness.sql(
        "INSERT INTO delivery_deliveryattempt (message_id, provider, outcome, response_code, error, "
        "duration_ms, created_at) SELECT id, 'smtp', 'accepted', '250', '', 40, sent_at "
        "FROM delivery_emailmessage WHERE id BETWEEN %s AND %s ORDER BY id", list(ids))
    harness.sql(
        "INSERT INTO feedback_emailevent (message_id, provider, provider_event_id, event_type, bounce_type, "
        "recipient, url, occurred_at, received_at, raw) SELECT id, 'smtp', 'evt-' || id, 'delivered', '', "
        "recipient, '', sent_at + interval '5 seconds', sent_at + interval '30 seconds', '{}' "
        "FROM delivery_emailmessage WHERE id BETWEEN %s AND %s AND id %% 2 = 0 ORDER BY id", list(ids))
    harness.sql(
        "INSERT INTO feedback_messageeventmark (message_id, event_type, first_at) SELECT message_id, "
        "'delivered', occurred_at FROM feedback_emailevent WHERE message_id BETWEEN %s AND %s ORDER BY id",
        list(ids))


def old_rows() -> dict[str, int]:
    """Per table, the largest id of the old install's rows (before anything was sent)."""
    return {table: harness.sql(f"SELECT coalesce(max(id), 0) FROM {table}")[0][0] for table in TABLES}


def checksums(last_ids: dict[str, int]) -> dict[str, list[int]]:
    """Per table: how many old rows, and an order-free sum of their texts' hashes."""
    return {table: [int(value) for value in harness.sql(
        f"SELECT count(*), coalesce(sum(hashtext(t::text)::bigint), 0) FROM {table} t WHERE id <= %s",
        [last])[0]] for table, last in last_ids.items()}


class Driver:
    """P0 OTPs through the API at `rate` per second, open loop: each thread sends on its own
    schedule and, when an answer is late, sends the next at once."""

    def __init__(self, url: str, key: str, rate: float) -> None:
        self.url, self.key, self.rate = url, key, rate
        self.results: list[tuple[float, float, int, int | None]] = []  # (start, ms, status, id)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(n,), daemon=True)
                         for n in range(DRIVER_THREADS)]
        self._lock = threading.Lock()

    def start(self) -> Driver:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _run(self, offset: int) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Api-Key {self.key}"
        interval = DRIVER_THREADS / self.rate
        due = time.monotonic() + offset / self.rate
        n = offset
        while not self._stop.is_set():
            time.sleep(max(0.0, due - time.monotonic()))
            body = {"to": f"otp{n}@example.com", "template": "bench-otp", "priority": "critical",
                    "context": {"code": str(n)}}
            started = time.monotonic()
            try:
                response = session.post(self.url, json=body, timeout=30)
                status = response.status_code
                message_id = response.json().get("id") if status == 202 else None
            except (requests.RequestException, ValueError):
                status, message_id = 0, None
            with self._lock:
                self.results.append((started, (time.monotonic() - started) * 1000, status, message_id))
            due += interval
            n += DRIVER_THREADS

    def window(self, start: float, end: float) -> dict[str, float]:
        latencies = [ms for at, ms, _status, _id in self.results if start <= at < end]
        if not latencies:
            return {"requests": 0}
        return {"requests": len(latencies), "p50_ms": harness.percentile(latencies, 0.5),
                "p99_ms": harness.percentile(latencies, 0.99), "max_ms": max(latencies),
                "rate": len(latencies) / (end - start)}


def move(env: dict[str, str], batch_size: int) -> tuple[list[tuple[float, str]], int]:
    """`manage.py partition_tables -v 2`: its lines, each with the time it came, and its exit code."""
    process = subprocess.Popen([harness.PY, "manage.py", "partition_tables", "-v", "2", "--batch-size",
                                str(batch_size)], cwd=harness.ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    lines = [(time.monotonic(), line.rstrip()) for line in process.stdout]
    return lines, process.wait()


def move_figures(lines: list[tuple[float, str]], started: float) -> dict[str, dict]:
    """Per table: seconds from its first line (prepare) to its last, rows copied, the swap."""
    tables: dict[str, dict] = {}
    previous_end = started
    for at, line in lines:
        table, _, what = line.partition(": ")
        if table not in TABLES:
            continue
        figures = tables.setdefault(table, {"start": previous_end, "rows": 0})
        if what.startswith("copied "):
            figures["rows"] += int(what.split()[1])
        elif what.startswith("swapped"):
            figures["swap"] = what
        elif what.startswith(("partitioned", "already")):
            figures["seconds"] = round(at - figures["start"], 1)
            figures["rows_per_s"] = round(figures["rows"] / max(at - figures["start"], 1e-3))
            previous_end = at
    for figures in tables.values():
        figures.pop("start")
    return tables


def wait_sent(ids: list[int], timeout: float) -> int:
    """Until every accepted message is settled (or `timeout`); how many are SENT."""
    deadline = time.monotonic() + timeout
    while True:
        ((sent,),) = harness.sql("SELECT count(*) FROM delivery_emailmessage WHERE id = ANY(%s) "
                                 "AND status = 'SENT'", [ids])
        if sent == len(ids) or time.monotonic() > deadline:
            return sent
        time.sleep(1)


def run(args: argparse.Namespace) -> dict:
    key = build(args.messages, args.days)
    last_ids = old_rows()
    before_sums = checksums(last_ids)
    logs = harness.log_dir(harness.LOG_DIR / "partition_move")
    sink = SmtpSink(free_port(), logs).start()
    port = free_port()
    env = harness.process_env(SMTP_HOST="127.0.0.1", SMTP_PORT=str(sink.port), NOTIFIER_PROVIDERS="smtp",
                              NOTIFIER_RETENTION_PERSONAL_DAYS="3650")  # the old rows stay as they are
    processes = [harness.web(env, logs, port), harness.worker("critical", env, logs),
                 harness.scheduler(env, logs)]
    driver = None
    try:
        for process in processes:
            process.start()
        harness.wait_http(f"http://127.0.0.1:{port}/healthz", timeout=60)
        processes[1].wait_for_log("ready", timeout=60)
        driver = Driver(f"http://127.0.0.1:{port}/api/v1/messages", key, args.rate).start()
        time.sleep(WARM_UP_SECONDS)  # the web's first requests (imports, connections) not counted
        warm = time.monotonic()
        time.sleep(args.settle)
        load_before = harness.loadavg()
        move_started = time.monotonic()
        lines, code = move(env, args.batch_size)
        move_ended = time.monotonic()
        load_during = harness.loadavg()
        time.sleep(args.settle)
        driver.stop()
        ids = [message_id for _at, _ms, status, message_id in driver.results if status == 202]
        sent = wait_sent(ids, 180)
    finally:
        if driver is not None:
            driver.stop()
        for process in processes:
            process.stop(timeout=20)
    entries, unknown = sink.read()
    sink.stop()
    at_sink = Counter(message_id for message_id, _mtime in entries)
    accepted = Counter(str(message_id) for message_id in ids)
    return {
        "messages": args.messages, "days": args.days, "rate": args.rate, "batch_size": args.batch_size,
        "move_exit_code": code, "move_seconds": round(move_ended - move_started, 1),
        "tables": move_figures(lines, move_started),
        "rows_per_s": round(sum(int(line.split()[2]) for _at, line in lines if ": copied " in line)
                            / (move_ended - move_started)),
        "accept_before": driver.window(warm, move_started),
        "accept_during": driver.window(move_started, move_ended),
        "accept_after": driver.window(move_ended, move_ended + args.settle),
        "not_202": dict(Counter(status for _at, _ms, status, _id in driver.results if status != 202)),
        "accepted": len(ids), "sent": sent,
        "lost": sum(1 for message_id in accepted if message_id not in at_sink),
        "duplicates": sum(count - 1 for count in at_sink.values() if count > 1),
        "unknown_at_sink": unknown,
        "old_rows_identical": checksums(last_ids) == before_sums, "old_rows": before_sums,
        "load_before": load_before, "load_after_move": load_during, "load_end": harness.loadavg(),
        "move_log": [line for _at, line in lines if "copied" not in line],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--rate", type=float, default=20.0, help="P0 accepts per second")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds of sends before and after")
    parser.add_argument("--batch-size", type=int, default=10_000)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    server_url = os.environ["DATABASE_URL"]
    harness.database_drop(DATABASE, server_url)
    harness.server_statement(f'CREATE DATABASE "{DATABASE}"', server_url)
    os.environ["DATABASE_URL"] = harness.scratch_database_url(DATABASE)
    try:
        result = run(args)
    finally:
        if not args.keep:
            from django.db import connections
            connections.close_all()
            harness.database_drop(DATABASE, server_url)
            print(f"dropped database {DATABASE}")
    harness.LOG_DIR.mkdir(parents=True, exist_ok=True)
    (harness.LOG_DIR / "partition_move.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "move_log"}, indent=2))
    print("\n".join(result["move_log"]))


if __name__ == "__main__":
    main()

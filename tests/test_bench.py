"""What the benchmark scripts share (bench/harness.py, bench/esps.py, bench/rows.py): a figure
printed by a script is only as good as these."""

from __future__ import annotations

import itertools
import random
import sys
import threading
import time
from collections.abc import Iterator
from datetime import date, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone

from audience.models import Contact
from bench import harness
from bench.esps import FakeEspProcess, ledger_counts
from bench.million_procs import Chaos
from bench.rows import contacts_insert, scheduled_messages_insert
from delivery.models import EmailMessage
from delivery.providers.base import Outcome, OutgoingEmail
from delivery.providers.http import HttpSettings
from delivery.providers.sendgrid.provider import SendGridProvider
from testkit.processes import ManagedProcess


class _SlowFirstAnswer(BaseHTTPRequestHandler):
    """Like gunicorn while its workers import Django: the connection is accepted, the first
    request answered only after the client's read timeout."""

    requests_seen = 0

    def do_GET(self) -> None:
        type(self).requests_seen += 1
        if type(self).requests_seen == 1:
            time.sleep(6)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def slow_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowFirstAnswer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_wait_http_waits_through_a_read_timeout(slow_server):
    harness.wait_http(f"http://127.0.0.1:{slow_server.server_port}/healthz", timeout=30)
    assert _SlowFirstAnswer.requests_seen == 2


def test_percentile_is_the_value_at_rank_q_n():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert [harness.percentile(values, q) for q in (0.0, 0.5, 0.99, 1.0)] == [1.0, 3.0, 5.0, 5.0]


def test_settle_waits_for_an_idle_machine_at_most_its_timeout():
    busy = threading.Event()

    def spin() -> None:  # one core busy: the 2-core machine is at most half idle
        while not busy.is_set():
            pass

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        began = time.monotonic()
        settled = harness.settle(idle=0.9, window=0.2, timeout=0.5)
        waited = time.monotonic() - began
    finally:
        busy.set()
        spinner.join()
    assert settled["idle"] < 0.9 and settled["seconds"] >= 0.5 and waited < 1.5
    assert 0.0 <= harness.cpu_idle_share(0.1) <= 1.0


def _email(message_id: int) -> OutgoingEmail:
    return OutgoingEmail(message_id=message_id, recipient=f"r{message_id}@example.com",
                         from_email="news@example.org", subject="s", text="t", html="<p>t</p>")


def test_fake_esp_process_returns_its_ledger(tmp_path):
    esp = FakeEspProcess("sendgrid", tmp_path / "ledger.jsonl").start()
    try:
        provider = SendGridProvider(HttpSettings(api_key="k", base_url=esp.url))
        results = provider.send_batch([_email(1), _email(2)]) + provider.send_batch([_email(2)])
        entries, outcomes = esp.stop_and_read()
    finally:
        esp.kill()
    assert {r.outcome for r in results} == {Outcome.ACCEPTED}
    assert sorted(message_id for message_id, _ in entries) == ["1", "2", "2"]
    assert ledger_counts(entries) == (2, 1)
    assert outcomes == {"accepted": 2}


def test_scheduled_messages_insert_writes_due_rows(db):
    low, high = scheduled_messages_insert(3, priority=1, key_prefix="t:1",
                                          due_sql="now() + (g * %s) * interval '1 second'", due_params=[10])
    rows = list(EmailMessage.objects.filter(id__range=(low, high)).order_by("id"))
    assert [(r.recipient, r.idempotency_key, r.status, r.priority) for r in rows] == [
        (f"u{n}@example.com", f"t:1:{n}", "SCHEDULED", 1) for n in (1, 2, 3)]
    gaps = [(b.scheduled_for - a.scheduled_for) for a, b in itertools.pairwise(rows)]
    assert gaps == [timedelta(seconds=10)] * 2 and rows[0].scheduled_for > timezone.now()


def test_contacts_insert_spreads_zones_and_sets_attributes(db):
    low, high = contacts_insert(4, ["UTC", "Asia/Tokyo"], "ci-", {"bench": "7"})
    contacts = list(Contact.objects.filter(id__range=(low, high)).order_by("id"))
    assert [(c.email, c.timezone, c.attributes) for c in contacts] == [
        ("ci-1@example.com", "Asia/Tokyo", {"bench": "7"}), ("ci-2@example.com", "UTC", {"bench": "7"}),
        ("ci-3@example.com", "Asia/Tokyo", {"bench": "7"}), ("ci-4@example.com", "UTC", {"bench": "7"})]


class _OneAtATime(BaseHTTPRequestHandler):
    """An API that accepts one request at a time, each in 50 ms: 20 requests/s at most."""

    accepted = itertools.count(1)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(0.05)
        body = f'{{"id": {next(self.accepted)}, "status": "QUEUED"}}'.encode()
        self.send_response(202)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_open_loop_latency_counts_from_the_intended_send_time():
    """40 requests offered at 40/s to a server that serves 20/s: the last ones wait ~1 s in
    line, and that wait is in their latency (a closed loop would report ~50 ms)."""
    from http.server import HTTPServer

    from bench.api_load import open_loop

    server = HTTPServer(("127.0.0.1", 0), _OneAtATime)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        outcome = open_loop(server.server_port, "key", rate=40, seconds=1, connections=8)
    finally:
        server.shutdown()
        server.server_close()
    assert len(outcome.accepted) == 40 and not outcome.errors
    assert harness.percentile(outcome.latencies_ms, 0.99) > 800


def test_chaos_kills_and_restarts_a_pool_that_has_no_child_process(tmp_path):
    """A threads pool has no children: the chaos's "kill a child" takes its process, restarted."""
    pool = ManagedProcess("critical", [sys.executable, "-c", "import time; time.sleep(60)"], {}, tmp_path)
    pool.start()
    try:
        before = pool.process.pid
        chaos = Chaos({"critical": pool}, interval=999, roles=("critical",))
        chaos._kill(random.Random(1), whole_pool=False)
        assert [event["kind"] for event in chaos.events] == ["kill-main"]
        assert pool.process.pid != before and pool.process.poll() is None
    finally:
        pool.stop()


def test_history_ids_carry_their_day():
    from bench import history_rows as rows

    day = rows.day_number(date(2026, 12, 1))
    assert rows.day_of_number(day) == date(2026, 12, 1)
    assert rows.id_day(rows.day_id(day, 1)) == day
    assert rows.id_day(rows.day_id(day, 2**32 - 1)) == day
    low, high = rows.day_bounds(day)
    assert (low, high) == (rows.day_id(day, 1) - 1, rows.day_bounds(day + 1)[0])
    assert rows.partition_name("feedback_emailevent", day) == "feedback_emailevent_20261201"
    with pytest.raises(ValueError):
        rows.day_id(day, 2**32)


def _history_services(name: str, day: int, *, first_campaign: int) -> list:
    """The generator's services (one per share of the mail), each with its templates, 20
    contacts and a campaign id of `day`."""
    from bench import history_rows as rows
    from clients.services import service_create
    from templates.services import template_create

    services = []
    for index in range(len(rows.SHARES)):
        service, _ = service_create(name=f"{name}-{index}")
        versions = [template_create(client=service, name=f"t{t}", subject="s", html_body="<p>x</p>").id
                    for t in range(rows.TEMPLATES)]
        services.append(rows.ServiceRows(service.pk, versions, rows.contacts_insert(service.pk, index, 20),
                                         20, {day: first_campaign + index}))
    return services


def test_history_copy_writes_each_row_into_its_day(db):
    """A tiny day through the real COPY: every id names the UTC day of its row's time (messages
    and attempts: created, events: received, so a night's opens are the next day's), and what
    hangs off the messages points at them."""
    from django.db import connection

    from bench import history_rows as rows

    day = rows.day_number(timezone.now().date()) - 3
    services = _history_services("history", day, first_campaign=1000)
    rows.ensure_history_partitions([day])  # the migration's current week may not hold it
    assert rows.ensure_history_partitions([day]) == []
    written = rows.copy_day(day, 200, 0.5, services, 3.0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), count(DISTINCT idempotency_key), bool_and(id >> 32 = "
                       "floor(extract(epoch FROM created_at) / 86400)) FROM delivery_emailmessage")
        assert cursor.fetchone() == (200, 200, True)
        cursor.execute("SELECT count(*), bool_and(id >> 32 = floor(extract(epoch FROM received_at) / 86400)),"
                       " count(DISTINCT id >> 32), bool_and(message_id >> 32 = %s) FROM feedback_emailevent",
                       [day])
        events, right_day, days, of_the_day = cursor.fetchone()
        cursor.execute("SELECT bool_and(id >> 32 = floor(extract(epoch FROM created_at) / 86400)) "
                       "FROM delivery_deliveryattempt")
        assert cursor.fetchone() == (True,)
        cursor.execute("SELECT count(*) FROM feedback_messageeventmark k "
                       "JOIN delivery_emailmessage m ON m.id = k.message_id")
        marks = cursor.fetchone()[0]
    assert right_day and of_the_day and days == 2 and written["feedback_emailevent"] == events
    assert 2.5 * 200 < events < 3.0 * 200 and marks == written["feedback_messageeventmark"]
    assert written["delivery_emailmessage"] == 200


def test_history_days_past_the_personal_retention_hold_no_personal_data(db):
    """A month of history as a running install holds it: the older days' rows are written as
    personal-data removal leaves them (clients/personal_data.py), the counts unchanged."""
    from django.db import connection

    from bench import history_rows as rows

    day = rows.day_number(timezone.now().date()) - 10
    services = _history_services("scrubbed", day, first_campaign=2000)
    rows.ensure_history_partitions([day, day + 1])
    written = rows.copy_day(day, 500, 0.5, services, 3.0, scrubbed=True)
    assert written["delivery_emailmessage"] == 500 and written["feedback_emailevent"] > 1000
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FILTER (WHERE recipient <> '' OR context <> '{}'::jsonb "
                       "OR error LIKE '%%@%%' OR recipient_hash IS NULL "
                       "OR personal_data_removed_at IS NULL), "
                       "count(*) FILTER (WHERE status = 'FAILED') FROM delivery_emailmessage")
        with_data, failed = cursor.fetchone()
        assert with_data == 0 and failed > 0  # failed rows: their SMTP answer quoted the address
        cursor.execute("SELECT count(*) FILTER (WHERE recipient <> '' OR raw <> '{}'::jsonb "
                       "OR url LIKE '%%?%%') FROM feedback_emailevent")
        assert cursor.fetchone() == (0,)
        cursor.execute("SELECT count(*) FROM delivery_deliveryattempt WHERE error LIKE '%%@%%'")
        assert cursor.fetchone() == (0,)


def test_history_partitions_and_deferred_indexes_on_a_partitioned_table(db):
    """The partitioned layout's path, on a table of that shape: the history's day partitions are
    created once, and the indexes and constraints dropped for the load come back on every
    partition (a partitioned index's definition reads ON ONLY)."""
    from django.db import connection

    from bench import history_rows as rows

    day = rows.day_number(date(2026, 11, 5))
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE growth_t (id bigint PRIMARY KEY, k text, m bigint) "
                       "PARTITION BY RANGE (id)")
        cursor.execute("CREATE INDEX growth_t_k ON growth_t (k)")
        cursor.execute("ALTER TABLE growth_t ADD CONSTRAINT growth_t_u UNIQUE (m, id)")
    # Thursday and Friday: one partition, the week from Monday (the app's spans)
    assert rows.ensure_history_partitions([day, day + 1], tables=["growth_t"]) == ["growth_t_20261102"]
    assert rows.ensure_history_partitions([day], tables=["growth_t"]) == []
    deferred = rows.defer_table("growth_t")
    assert [name for name, _ in deferred.indexes] == ["growth_t_k"]
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO growth_t VALUES (%s, 'a', 1), (%s, 'a', 1)",
                       [rows.day_id(day, 1), rows.day_id(day + 1, 1)])
        rows.restore_table(deferred)
        cursor.execute("SELECT count(*) FROM pg_indexes WHERE tablename = 'growth_t_20261102'")
        assert cursor.fetchone()[0] == 3  # primary key, k, (m, id)
        cursor.execute("SELECT tableoid::regclass::text FROM growth_t ORDER BY id")
        assert [row[0] for row in cursor.fetchall()] == ["growth_t_20261102", "growth_t_20261102"]

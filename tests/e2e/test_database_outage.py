"""PostgreSQL goes away mid-campaign while OTPs and signed webhooks arrive (faults.md F9).

The stack (web, the critical, normal and ops pools, the scheduler) runs on a PostgreSQL cluster
of the test's own, which the test either crashes (`pg_ctl stop -m immediate`, 12 s down, then
started again: recovery from the WAL) or keeps up while killing every connection to it with
`pg_terminate_backend`, as a failover or a proxy restart does. Then it counts, at the SMTP server:
every campaign recipient and every accepted OTP arrived exactly once, no row is AMBIGUOUS for a
send the server accepted, the campaign COMPLETED within 2 minutes of the database's return, and
every webhook the web acknowledged with a 2xx was stored.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg2
import pytest
import requests

from devtools.embedded import EmbeddedPostgres
from testkit import processes
from testkit.ports import free_port
from testkit.waiting import wait_for
from testkit.webhook_signing import mailgun_body
from tests.feedback.samples import mailgun_event_data
from tests.support.streams import Stream
from tests.support.web import wait_until_serving

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RECIPIENTS = 1200
CRASH_AFTER_SENT = 300  # campaign messages at the SMTP server when the database goes away
DOWN_SECONDS = 12
COMPLETE_WITHIN_SECONDS = 120
MIN_OTPS = 100  # accepted OTPs to count, before, during and after the outage
MAILGUN_KEY = "outage-test-mailgun-signing-key"


@pytest.fixture
def own_postgres(tmp_path) -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL cluster of this test's own (the session's server is never touched)."""
    server = EmbeddedPostgres(tmp_path / "pg", database="notifier")
    server.start(durable=False)
    yield server
    server.stop(mode="immediate")


class Stack:
    """The notifier processes on `own_postgres`, and what the test reads back from it."""

    def __init__(self, database: EmbeddedPostgres, smtp_port: int, spawn, log_dir: Path) -> None:
        self.database = database
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = processes.subprocess_env(
            DATABASE_URL=database.url(), SMTP_HOST="127.0.0.1", SMTP_PORT=str(smtp_port),
            # Keys of this stack's own: its client ids restart at 1, as the session's do.
            NOTIFIER_REDIS_PREFIX=f"outage-{uuid.uuid4().hex[:8]}",
            FEEDBACK_MAILGUN_SIGNING_KEY=MAILGUN_KEY,
        )
        self._spawn, self._log_dir = spawn, log_dir
        self.key = ""
        self.pools: dict[str, processes.ManagedProcess] = {}

    def manage(self, *args: str) -> str:
        result = subprocess.run([sys.executable, "manage.py", *args], cwd=processes.BASE_DIR,
                                env=self.env, check=True, capture_output=True, text=True)
        return result.stdout

    def start(self) -> Stack:
        self.manage("migrate", "--noinput")
        self.key = self.manage("create_api_key", "outage", "--scopes", "send,campaigns",
                               "--rate", "100000/min").strip().splitlines()[-1]
        self._spawn(processes.web_server(self.env, self._log_dir, self.port, workers=2))
        for role, concurrency in (("critical", 2), ("normal", 2)):
            self.pools[role] = self._spawn(processes.celery_worker(role, self.env, self._log_dir,
                                                                   concurrency=concurrency))
        self.pools["ops"] = self._spawn(processes.ops_worker(self.env, self._log_dir, concurrency=2))
        self.pools["scheduler"] = self._spawn(processes.scheduler(self.env, self._log_dir))
        wait_until_serving(self.port)
        for role in ("critical", "normal", "ops"):
            self.pools[role].wait_for_log("ready.", timeout=60)
        self.template_create("otp", "Your code {{ code }}", "<p>Your code is <b>{{ code }}</b></p>")
        return self

    def post(self, path: str, body: dict, **headers: str) -> requests.Response:
        return requests.post(f"{self.url}{path}", json=body, timeout=10,
                             headers={"Authorization": f"Api-Key {self.key}", **headers})

    def get(self, path: str) -> requests.Response:
        return requests.get(f"{self.url}{path}", timeout=10,
                            headers={"Authorization": f"Api-Key {self.key}"})

    def template_create(self, name: str, subject: str, html_body: str) -> int:
        response = self.post("/api/v1/templates", {"name": name, "subject": subject, "html_body": html_body})
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        connection = psycopg2.connect(self.database.url())
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.fetchall()
        finally:
            connection.close()


def _otp_stream(stack: Stack, accepted: list[int]) -> Stream:
    run = uuid.uuid4().hex[:8]

    def send(n: int) -> requests.Response:
        response = stack.post("/api/v1/messages", {
            "to": f"otp{n}@example.com", "template": "otp", "priority": "critical",
            "context": {"code": str(n)}}, **{"Idempotency-Key": f"otp-{run}-{n}"})
        if response.status_code == 202:
            accepted.append(response.json()["id"])
        return response

    return Stream(send, interval=0.05)  # 20 OTPs a second


def _webhook_stream(stack: Stack, accepted_otps: list[int], acknowledged: list[str]) -> Stream:
    """Signed Mailgun `delivered` events for OTPs already accepted, 10 a second; a retry posts
    the same body (Mailgun's retry carries the same token)."""
    bodies: dict[int, tuple[str, bytes]] = {}

    def send(n: int) -> requests.Response | None:
        if n not in bodies:
            if not accepted_otps:
                return None
            message_id = accepted_otps[n % len(accepted_otps)]
            event_id = f"evt-{uuid.uuid4().hex}"
            data = mailgun_event_data("delivered", message_id=message_id,
                                      recipient=f"otp{message_id}@example.com",
                                      when=datetime.now(UTC), event_id=event_id)
            bodies[n] = (event_id, mailgun_body(MAILGUN_KEY, data))
        event_id, body = bodies[n]
        response = requests.post(f"{stack.url}/webhooks/mailgun/", data=body, timeout=10,
                                 headers={"Content-Type": "application/json"})
        if response.status_code < 300:
            acknowledged.append(event_id)
        return response

    return Stream(send, interval=0.1)


def _launch_campaign(stack: Stack) -> int:
    template_id = stack.template_create("news", "News for {{ name }}", "<p>Hello {{ name }}</p>")
    contacts = [{"email": f"reader{i}@example.com", "name": f"Reader {i}"} for i in range(RECIPIENTS)]
    response = stack.post("/api/v1/notifications/email", {
        "template_id": template_id, "priority": "normal",
        "recipients": {"type": "inline", "contacts": contacts}})
    assert response.status_code == 202, response.text
    return response.json()["campaign_id"]


def _health(stack: Stack) -> int:
    return requests.get(f"{stack.url}/healthz", timeout=10).status_code


def _campaign_status(stack: Stack, campaign_id: int) -> str:
    response = stack.get(f"/api/v1/campaigns/{campaign_id}")
    return response.json().get("status", "") if response.status_code == 200 else ""


def _received(smtp_server) -> Counter:
    return Counter(int(i) for i in smtp_server.handler.ids() if i)


def _run_outage(stack: Stack, smtp_server, break_database: Callable[[], float]) -> dict:
    """Launch the campaign under both streams, break the database once enough is sent, then
    wait for the campaign; the figures the assertions read."""
    accepted_otps: list[int] = []
    acknowledged: list[str] = []
    campaign_id = _launch_campaign(stack)
    with _otp_stream(stack, accepted_otps) as otps, \
            _webhook_stream(stack, accepted_otps, acknowledged) as hooks:
        assert wait_for(lambda: sum(_received(smtp_server).values()) >= CRASH_AFTER_SENT, timeout=90)
        back_at = break_database()
        sent_at_return = sum(_received(smtp_server).values())
        wait_for(lambda: sum(_received(smtp_server).values()) > sent_at_return, timeout=60, interval=0.05)
        resumed_after = time.monotonic() - back_at
        # The streams keep going after the database's return (new OTPs must flow at once too).
        wait_for(lambda: _campaign_status(stack, campaign_id) == "COMPLETED",
                 timeout=COMPLETE_WITHIN_SECONDS + 30)
        completed_after = time.monotonic() - back_at
        # A loaded machine posts slower than 20/s: keep the OTPs coming until there are enough
        # to count (the campaign may finish first).
        wait_for(lambda: len(accepted_otps) > MIN_OTPS, timeout=60)
    print(f"\n{break_database.__name__}: sending resumed {resumed_after:.1f} s after the database's "
          f"return, campaign COMPLETED after {completed_after:.1f} s")
    return {"campaign_id": campaign_id, "otps": accepted_otps, "acknowledged": acknowledged,
            "stream_errors": otps.errors + hooks.errors, "completed_after": completed_after,
            "resumed_after": resumed_after}


def _assert_nothing_lost_nothing_twice(stack: Stack, smtp_server, run: dict) -> None:
    campaign_id = run["campaign_id"]
    assert run["stream_errors"] == []
    assert _campaign_status(stack, campaign_id) == "COMPLETED", stack.pools["scheduler"].log()[-3000:]
    assert run["completed_after"] <= COMPLETE_WITHIN_SECONDS
    assert _health(stack) == 200  # every web process reconnected
    # Every task that met the outage was published again, none acknowledged as failed (gone).
    for pool in ("critical", "normal", "ops"):
        log = stack.pools[pool].log()
        assert "raised unexpected" not in log, log[-3000:]
    assert "database unavailable" in stack.pools["normal"].log()
    campaign_rows = {row[0] for row in stack.query(
        "SELECT id FROM delivery_emailmessage WHERE campaign_id = %s", (campaign_id,))}
    assert len(campaign_rows) == RECIPIENTS
    otps = set(run["otps"])
    assert len(otps) > MIN_OTPS
    assert wait_for(lambda: otps <= set(_received(smtp_server)), timeout=60)
    time.sleep(1)
    received = _received(smtp_server)
    assert campaign_rows - set(received) == set()  # 0 lost campaign recipients
    assert otps - set(received) == set()  # 0 lost OTPs
    assert [m for m, n in received.items() if n > 1] == []  # 0 duplicates
    unresolved = "SELECT id FROM delivery_emailmessage WHERE status IN ('AMBIGUOUS', 'SENDING')"
    wait_for(lambda: not stack.query(unresolved), timeout=30)  # the last OTPs' SENT marks
    ambiguous = {row[0] for row in stack.query(unresolved)}
    assert ambiguous & set(received) == set()  # an accepted send is never left unresolved
    stored = "\n".join(row[0] for row in stack.query("SELECT body FROM feedback_webhookdelivery"))
    assert len(run["acknowledged"]) > 50
    assert [e for e in run["acknowledged"] if e not in stored] == []  # every 2xx was stored


def test_postgres_crash_mid_campaign_loses_nothing_and_sends_nothing_twice(
        own_postgres, smtp_server, purged_queues, spawn, tmp_path):
    stack = Stack(own_postgres, smtp_server.port, spawn, tmp_path).start()

    def crash() -> float:
        own_postgres.stop(mode="immediate")
        assert wait_for(lambda: _health(stack) == 503, timeout=5)
        time.sleep(DOWN_SECONDS)
        own_postgres.start(durable=False)
        return time.monotonic()

    run = _run_outage(stack, smtp_server, crash)
    _assert_nothing_lost_nothing_twice(stack, smtp_server, run)


def test_every_connection_killed_mid_campaign_loses_nothing_and_sends_nothing_twice(
        own_postgres, smtp_server, purged_queues, spawn, tmp_path):
    stack = Stack(own_postgres, smtp_server.port, spawn, tmp_path).start()

    def terminate_every_backend() -> float:
        # Several rounds over ~10 s: reconnections made after one round are killed by the next.
        for _ in range(5):
            stack.query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'")
            time.sleep(2)
        return time.monotonic()

    run = _run_outage(stack, smtp_server, terminate_every_backend)
    _assert_nothing_lost_nothing_twice(stack, smtp_server, run)
